"""`infill-docstrings`: insert missing docstrings into Python files; a pre-commit hook.

    infill-docstrings a.py b.py            # write them in place; exit 1 if a file changed
    infill-docstrings --check a.py b.py    # only report what would change; exit 1 if anything would

Each function and class without a docstring gets one written by the model (`infill.modes.docstrings`,
as `infill FILE --document` does), like a formatter: the files are changed in place (atomic
writes; BOM, line endings and tabs kept), the commit fails once, and you review and stage the
docstrings. Nothing is inserted that would make a file stop parsing. A file that cannot be read
(binary, not UTF-8) or that does not parse is left untouched, with a message. The model is
loaded once per call (and not at all when no file lacks a docstring).

Exit codes: 0 nothing to change; 1 files changed (with --check: would change); 2 a file could
not be read or parsed (the others are still processed), or bad arguments; 3 the model could not
be loaded.
"""

from __future__ import annotations

import argparse
import ast
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from infill.docstring_sites import DocstringSite, missing_docstrings
from infill.document import Document, load_document, write_atomic
from infill.errors import InputError, ModelError

if TYPE_CHECKING:
    from infill.backend import Denoiser

EXIT_OK, EXIT_CHANGED, EXIT_INPUT, EXIT_MODEL = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill-docstrings", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "files", nargs="*", type=Path, help="Python files (pre-commit passes the staged ones)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing: report the docstrings that would be added, exit 1 if any",
    )
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: the model shipped with infill)"
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for the model")
    return parser  # fmt: skip


class Backend:
    """The model, loaded the first time a file needs it."""

    def __init__(self, model: Path | None, threads: int | None):
        self.model, self.threads = model, threads
        self._loaded: Denoiser | None = None

    def get(self) -> Denoiser:
        if self._loaded is None:
            from infill.backend import load_backend  # torch: only when a docstring is missing

            self._loaded = load_backend(self.model, threads=self.threads)
        return self._loaded


def readable(path: Path) -> Document | str:
    """The file's document, or why it is left untouched."""
    try:
        document = load_document(path)
    except InputError as error:
        return f"{error}; left untouched"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(document.text, filename=str(path))
    except SyntaxError as error:
        return f"{path}:{error.lineno}: syntax error ({error.msg}); left untouched"
    except ValueError as error:  # e.g. a NUL character
        return f"{path}: cannot be parsed ({error}); left untouched"
    return document


def document_file(path: Path, document: Document, sites: list[DocstringSite], backend: Backend,
                  check: bool) -> bool:  # fmt: skip
    """Write the docstrings the model gives for `sites` (or, with `check`, report them); whether
    the file changed (would change)."""
    from infill.edits import apply_edits
    from infill.modes.docstrings import add_docstrings

    result = add_docstrings(backend.get(), document, sites)
    for fill in result.fills:
        if fill.reason:
            print(f"{path}:{fill.site.line}: {fill.site.name}: no docstring written ({fill.reason})")
    new_text = apply_edits(document.text, result.edits)
    if new_text == document.text:
        return False
    names = ", ".join(f"{fill.site.name} (line {fill.site.line})" for fill in result.fills if fill.edit)
    count = len(result.edits)
    if check:
        print(f"{path}: would add {count} docstring(s): {names}")
    else:
        write_atomic(path, document.encode(new_text))
        print(f"{path}: added {count} docstring(s): {names}")
    return True


def run(args: argparse.Namespace) -> int:
    backend = Backend(args.model, args.threads)
    changed, failed = [], []
    for path in args.files:
        document = readable(path)
        if isinstance(document, str):
            print(f"infill-docstrings: {document}", file=sys.stderr)
            failed.append(path)
            continue
        sites = missing_docstrings(document.text)
        if sites and document_file(path, document, sites, backend, args.check):
            changed.append(path)
    if changed:
        verb = "would change" if args.check else "changed"
        print(
            f"infill-docstrings: {len(changed)} file(s) {verb}"
            + ("" if args.check else ": review and stage them")
        )
    if failed:
        return EXIT_INPUT
    return EXIT_CHANGED if changed else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads is not None and args.threads < 1:
        print("infill-docstrings: error: --threads must be at least 1", file=sys.stderr)
        return EXIT_INPUT
    try:
        return run(args)
    except ModelError as error:
        print(f"infill-docstrings: model error: {error}", file=sys.stderr)
        return EXIT_MODEL
    except KeyboardInterrupt:
        print("infill-docstrings: interrupted (files written so far are complete)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
