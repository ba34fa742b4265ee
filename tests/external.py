"""External programs that some tests need (nvim; code-server, chromium, node for VS Code).

    from external import require_program

    @pytest.fixture
    def nvim() -> str:
        return require_program("nvim", install="apt-get install -y neovim")

`require_program(name, install=...)` returns the program's path when it is on PATH. When it is
missing, the test is skipped with a loud reason that says how to install it, so that the
README's test command passes on a fresh machine; but when the environment variable CI is set
(CI=true, as CI systems and `.ci/run` set it) the test *fails* instead, so that a missing install
step in CI cannot hide behind a skip. pytest shows skip reasons in its summary (`-rs` in
pyproject's addopts). `require_module(name, install=...)` does the same for a Python module that
only some tests need (ray, for the team server's).
"""

from __future__ import annotations

import os
import shutil

import pytest

FALSE_VALUES = ("", "0", "false", "no")


def in_ci() -> bool:
    """Whether CI is set (to anything but "", "0", "false", "no")."""
    return os.environ.get("CI", "").strip().lower() not in FALSE_VALUES


def require_program(name: str, install: str, path: str | None = None) -> str:
    """The path of program `name` (found on `path`, default PATH); skip the test if it is
    missing, or fail it when CI is set. `install`: the command (or hint) that installs it."""
    found = shutil.which(name, path=path)
    if found is not None:
        return found
    reason = f"{name} is not installed (not on PATH): install it with `{install}`"
    if in_ci():
        pytest.fail(f"{reason}. CI is set, so a missing program is a failure, not a skip", pytrace=False)
    pytest.skip(f"NOT TESTED: {reason}; with CI=true this is a failure")


def require_module(name: str, install: str):
    """The Python module `name`, imported; skip the test if it is not installed (fail with CI
    set), as `require_program` does for programs. `install`: the command that installs it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        reason = f"the Python module {name} is not installed: install it with `{install}`"
    if in_ci():
        pytest.fail(f"{reason}. CI is set, so a missing module is a failure, not a skip", pytrace=False)
    pytest.skip(f"NOT TESTED: {reason}; with CI=true this is a failure")


def require_built(build, what: str, cpu_reasons: tuple[str, ...]):
    """The library a C source of infill's built (`build`: the module's build function, called
    after the C compiler is required): skipped where this CPU cannot run it (a reason starting
    with one of `cpu_reasons`), a failure where it should have built. `what`: its name in words."""
    require_program("cc", install="apt-get install -y gcc")
    built = build()
    if built.library is None:
        if built.reason.startswith(cpu_reasons):
            pytest.skip(f"NOT TESTED: {what}: {built.reason}")
        pytest.fail(f"{what} did not build: {built.reason}")
    return built.library
