"""The pre-commit docstring hook: `infill-docstrings` (infill/docstrings_hook.py), run by the real
`pre-commit` package in a temporary git repository, as a commit runs it.

The hook is configured as docs/pre-commit.md's `repo: local` / `language: system` recipe, pointing
at this venv's `infill-docstrings` (a `language: python` hook would pip-install torch into an
environment of its own), with a tiny random model so that the test is quick. The rest runs the
command itself: several files per call, unreadable and unparsable files left untouched.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import yaml
from external import require_program
from lsp_support import tiny_model_dir

from infill.docstrings_hook import EXIT_CHANGED, EXIT_INPUT, EXIT_OK, main
from infill.text.docstring_sites import missing_docstrings

pytestmark = pytest.mark.external  # pre-commit, running the hook as another process

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENTRY = pathlib.Path(sys.executable).parent / "infill-docstrings"

MODULE = textwrap.dedent(
    '''\
    import math


    def area(radius):
        return math.pi * radius ** 2


    class Circle:
        """A circle."""

        def __init__(self, radius):
            self.radius = radius

        def scaled(self, factor):
            return Circle(self.radius * factor)
    '''
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


@pytest.fixture
def git() -> str:
    return require_program("git", install="apt-get install -y git")


def hook_config(model: pathlib.Path, args: list[str] = ()) -> str:
    entry = f"{ENTRY} --model {model} --threads 1"
    hook = {
        "id": "infill-docstrings",
        "name": "infill docstrings",
        "entry": entry,
        "language": "system",
        "types": ["python"],
        "require_serial": True,
        "exclude": "^vendored/",
        "args": list(args),
    }
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]})


def run(command: list[str], cwd: pathlib.Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_pre_commit_hook_fails_once_then_passes(tmp_path, git, tiny):
    assert ENTRY.exists(), f"{ENTRY} is missing: pip install -e '.[test]'"
    repo = tmp_path / "repo"
    (repo / "vendored").mkdir(parents=True)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "HOME": str(tmp_path)}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")  # fmt: skip
    run([git, "init", "-q", "-b", "main"], repo, env)
    (repo / "shapes.py").write_text(MODULE)
    (repo / "vendored" / "lib.py").write_text(MODULE)  # excluded by the hook's `exclude`
    pre_commit = [sys.executable, "-m", "pre_commit"]

    # --check (as hook args) reports and changes nothing.
    (repo / ".pre-commit-config.yaml").write_text(hook_config(tiny, ["--check"]))
    run([git, "add", "-A"], repo, env)
    checked = run([*pre_commit, "run"], repo, env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "would add" in checked.stdout and "shapes.py" in checked.stdout
    assert (repo / "shapes.py").read_text() == MODULE

    # A commit with the hook installed: fails once with the files changed ...
    (repo / ".pre-commit-config.yaml").write_text(hook_config(tiny))
    installed = run([*pre_commit, "install"], repo, env)
    assert installed.returncode == 0, installed.stderr
    run([git, "add", "-A"], repo, env)
    first = run([git, "commit", "-q", "-m", "shapes"], repo, env)
    assert first.returncode != 0, "the first commit should fail: the hook changed files"
    output = first.stdout + first.stderr
    assert "Failed" in output and "files were modified by this hook" in output, output
    written = (repo / "shapes.py").read_text()
    assert written != MODULE
    ast.parse(written)  # the file still parses
    assert len(missing_docstrings(written)) < len(missing_docstrings(MODULE))
    assert written.startswith("import math\n") and written.endswith("Circle(self.radius * factor)\n")
    assert (repo / "vendored" / "lib.py").read_text() == MODULE  # excluded: untouched

    # ... and once the changes are reviewed and staged, the second commit passes.
    run([git, "add", "-A"], repo, env)
    second = run([git, "commit", "-q", "-m", "shapes"], repo, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (repo / "shapes.py").read_text() == written
    log = run([git, "log", "--oneline"], repo, env).stdout
    assert len(log.splitlines()) == 1


GO_FILE = """\
package shapes

type Square struct {
\tSide float64
}

func (s Square) Area() float64 {
\treturn s.Side * s.Side
}

func NewSquare(side float64) Square {
\treturn Square{Side: side}
}
"""
PY_FILE = "def area(r):\n    return r * r\n\n\nclass Shape:\n    pass\n"


@pytest.mark.parametrize(("name", "text"), [("shapes.py", PY_FILE), ("shapes.go", GO_FILE)])
def test_pre_commit_run_twice_passes_the_second_time(tmp_path, git, name, text):
    """The hook reaches its fixed point in one run: the second run, on its own output, changes
    nothing (before, a second run added a docstring the first had left out). The shipped model,
    as users run it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "HOME": str(tmp_path)}
    run([git, "init", "-q", "-b", "main"], repo, env)
    (repo / name).write_text(text)
    config = yaml.safe_load(hook_config(pathlib.Path("unused")))
    hook = config["repos"][0]["hooks"][0]
    hook["entry"] = f"{ENTRY} --threads 1"  # the shipped model
    [declared] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook["types"], hook["files"] = declared["types"], declared["files"]
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    pre_commit = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    run([git, "add", "-A"], repo, env)
    first = run(pre_commit, repo, env)
    written = (repo / name).read_text()
    assert first.returncode == 1 and written != text, first.stdout + first.stderr
    run([git, "add", "-A"], repo, env)
    second = run(pre_commit, repo, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (repo / name).read_text() == written


def test_several_files_per_call_bad_ones_left_untouched(tmp_path, tiny, capsys):
    good, other = tmp_path / "good.py", tmp_path / "other.py"
    good.write_text(MODULE)
    other.write_text(MODULE.replace("area", "volume"))
    broken = tmp_path / "broken.py"
    broken.write_bytes(b"def f(:\n    return 1\n")
    latin = tmp_path / "latin1.py"
    latin.write_bytes("def caf\xe9():\n    return 1\n".encode("latin-1"))
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\x00\x01def g():\n    pass\n")
    bad = {path: path.read_bytes() for path in (broken, latin, binary)}
    files = [str(p) for p in (good, broken, latin, binary, other)]

    assert main(["--check", "--model", str(tiny), *files]) == EXIT_INPUT  # unreadable files: 2
    assert good.read_text() == MODULE and other.read_text() == MODULE.replace("area", "volume")
    assert main(["--check", "--model", str(tiny), str(good)]) == EXIT_CHANGED
    assert good.read_text() == MODULE

    capsys.readouterr()
    assert main(["--model", str(tiny), *files]) == EXIT_INPUT
    out, err = capsys.readouterr()
    assert f"{broken}:1: syntax error" in err and "left untouched" in err
    assert f"{latin}: not valid UTF-8" in err and "binary" in err
    assert {path: path.read_bytes() for path in bad} == bad  # untouched
    for path in (good, other):  # both processed in the one call
        assert path.read_text() != MODULE
        ast.parse(path.read_text())
        assert f"{path}: added" in out
    assert main(["--model", str(tiny), str(good), str(other)]) == EXIT_OK  # nothing left to add


def test_a_file_keeps_its_bom_and_crlf_line_endings(tmp_path, tiny):
    windows = tmp_path / "windows.py"
    original = b"\xef\xbb\xbf" + MODULE.replace("\n", "\r\n").encode()
    windows.write_bytes(original)
    assert main(["--model", str(tiny), str(windows)]) == EXIT_CHANGED
    data = windows.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data != original
    assert b"\n" not in data.replace(b"\r\n", b"")  # every line break is still CRLF
    ast.parse(data.decode("utf-8-sig"))


def test_no_missing_docstring_needs_no_model(tmp_path):
    done = tmp_path / "done.py"
    done.write_text('def f():\n    """Done."""\n')
    assert main(["--model", str(tmp_path / "no-model-here"), str(done)]) == EXIT_OK
    assert main(["--check", "--model", str(tmp_path / "no-model-here"), str(done)]) == EXIT_OK


def test_the_hook_is_declared_for_pre_commit():
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "infill-docstrings" and hook["entry"] == "infill-docstrings"
    assert hook["language"] == "python" and hook["types"] == ["text"] and "types_or" not in hook
    from identify.identify import tags_from_filename

    from infill.docstrings_hook import pre_commit_files
    from infill.text.languages import LANGUAGES, by_path

    assert hook["files"] == pre_commit_files()  # made from the language table
    recipe = (ROOT / "docs" / "pre-commit.md").read_text().split("```yaml")[1].split("```")[0]
    assert yaml.safe_load(recipe)["repos"][0]["hooks"][0]["files"] == hook["files"]  # Option 1
    extensions = {extension for language in LANGUAGES for extension in language.extensions}
    assert {".mts", ".cts", ".h++"} <= extensions
    assert not tags_from_filename("x.mts") | tags_from_filename("x.cts") | tags_from_filename("x.h++")
    for extension in extensions:  # pre-commit passes a file of every language infill documents
        for name in (f"src/x{extension}", f"X{extension.upper()}"):
            assert re.search(hook["files"], name) and by_path(name) is not None, name
    for name in ("README.md", "notes.txt", "data.json", "x.pyc", ".gitignore", "src/x.tsx.orig"):
        assert not re.search(hook["files"], name), name
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'infill-docstrings = "infill.docstrings_hook:main"' in scripts


def test_pre_commit_passes_every_language_s_files_and_scripts_to_the_hook(tmp_path, git):
    """The real pre-commit, with the declared `types` and `files`, on a file of each extension of
    the table (.mts, .cts and .h++ too, which identify has no tags for), a Python script without an
    extension, and files it must not pass (other languages, a binary file without an extension)."""
    from infill.text.languages import LANGUAGES

    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "HOME": str(tmp_path)}
    run([git, "init", "-q", "-b", "main"], repo, env)
    wanted = sorted(f"x{extension}" for language in LANGUAGES for extension in language.extensions)
    for name in wanted:
        (repo / name).write_text("x\n")
    (repo / "tool").write_text("#!/usr/bin/env python3\nprint(1)\n")
    (repo / "tool").chmod(0o755)
    (repo / "Makefile").write_text("all:\n")
    for name in ("README.md", "notes.txt", "data.json"):
        (repo / name).write_text("x\n")
    (repo / "blob").write_bytes(b"\x00\x01\x02")  # no extension, but binary
    [declared] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    show = tmp_path / "show.py"  # the hook: prints the files pre-commit passes it
    show.write_text("import sys\nprint('PASSED', sorted(sys.argv[1:]))\n")
    hook = {"id": "show", "name": "show", "entry": f"{sys.executable} {show}", "language": "system",
            "verbose": True, "require_serial": True,  # one call: one line listing every file
            "types": declared["types"], "files": declared["files"]}  # fmt: skip
    config = {"repos": [{"repo": "local", "hooks": [hook]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    run([git, "add", "-A"], repo, env)
    done = run([sys.executable, "-m", "pre_commit", "run", "--all-files"], repo, env)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("PASSED")]
    passed = ast.literal_eval(line.removeprefix("PASSED "))
    assert passed == sorted([*wanted, "tool", "Makefile"])


def test_a_file_without_an_extension_is_a_script_or_skipped(tmp_path, tiny, capsys):
    makefile, tool = tmp_path / "Makefile", tmp_path / "tool"
    makefile.write_text("all:\n\techo done\n")
    tool.write_text("#!/usr/bin/env python3\ndef main():\n    return 1\n")
    assert main(["--check", "--model", str(tiny), str(makefile)]) == EXIT_OK  # not an error
    assert "Makefile: no extension, and no #! line naming a language; skipped" in capsys.readouterr().err
    assert main(["--check", "--model", str(tiny), str(makefile), str(tool)]) == EXIT_CHANGED
    assert f"{tool}: would add" in capsys.readouterr().out  # a Python script, by its #! line
    notes = tmp_path / "notes.txt"
    notes.write_text("def f():\n    pass\n")
    assert main(["--check", "--model", str(tiny), str(notes)]) == EXIT_INPUT  # named, no grammar: an error
