"""`infill-docstrings`: insert missing documentation into source files; a pre-commit hook.

    infill-docstrings a.py b.go            # write them in place; exit 1 if a file changed
    infill-docstrings --check a.py b.ts    # only report what would change; exit 1 if anything would

Each function and class without documentation gets it written by the model
(`infill.modes.docstrings`, as `infill FILE --document` does): Python docstrings, and in the
other languages of infill.text.languages a comment of the language's convention (JSDoc, Javadoc,
Doxygen, rustdoc, Go doc comments: infill.text.doc_comments). Like a formatter, the files are changed
in place (atomic writes; BOM, line endings and tabs kept), the commit fails once, and you review
and stage the documentation. Nothing is inserted that would make a file stop parsing. A file that
cannot be read (binary, not UTF-8), that does not parse, or whose language infill has no grammar
for is left untouched, with a message. A file without an extension is a script whose language
its ``#!`` line names; when it names none the file is skipped (a note, not an error: pre-commit
passes such files, see :func:`pre_commit_files`). The model is loaded once per call (and not at
all when no file lacks documentation).

One run reaches a fixed point: after inserting what the model wrote, the file is documented again
with what is still missing (each site then sees the others' documentation, as the next run
would), until a round adds nothing. So a second run on the output changes nothing, and the commit
fails once only. The sites the model could not document are reported (``--check`` too).

Exit codes: 0 nothing to change; 1 files changed (with --check: would change); 2 a file could
not be read or parsed (the others are still processed), or bad arguments; 3 the model could not
be loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infill.errors import InputError, ModelError
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import Document, load_document, write_atomic
from infill.text.languages import LANGUAGES, known
from infill.text.syntax import file_problems

if TYPE_CHECKING:
    from infill.models.base import Denoiser
    from infill.modes.docstrings import DocstringFill

EXIT_OK, EXIT_CHANGED, EXIT_INPUT, EXIT_MODEL = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill-docstrings", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "files", nargs="*", type=Path,
        help="source files: Python, JavaScript, TypeScript, Go, Rust, Java, C, C++ (pre-commit passes "
        "the staged ones)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing: report the docstrings and doc comments that would be added, exit 1 if any",
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
            from infill.models.native import load_backend  # torch: only when a docstring is missing

            self._loaded = load_backend(self.model, threads=self.threads)
        return self._loaded


def pre_commit_files() -> str:
    """The ``files`` pattern of the hook's pre-commit declaration (.pre-commit-hooks.yaml, with
    ``types: [text]``): the extensions of the languages of infill.text.languages, in any case, and
    names without an extension (scripts: their ``#!`` line may name a language). pre-commit's
    ``types`` match identify's tags, and identify has none for .mts, .cts and .h++; a ``files``
    pattern and ``types`` must both match, so the languages are chosen by name here."""
    extensions = sorted({extension[1:] for language in LANGUAGES for extension in language.extensions})
    return r"(?i)(^|/)[^/.]+$|\.(" + "|".join(re.escape(extension) for extension in extensions) + r")$"


def readable(path: Path) -> Document | str | None:
    """The file's document (in the language its extension tells), why it is left untouched, or
    None for a file without an extension whose ``#!`` line names no language (not a source file
    of a language infill knows: skipped)."""
    try:
        document = load_document(path)
    except InputError as error:
        return f"{error}; left untouched"
    language = document.language
    if not language.has_grammar and not path.suffix:
        return None
    if not language.has_grammar:
        return f"{path}: no grammar for this file's language ({known()}); left untouched"
    problems = file_problems(document.text, language)
    if problems:
        line = document.text.count("\n", 0, problems[0].start) + 1
        return f"{path}:{line}: {problems[0].message} ({language.title}); left untouched"
    return document


@dataclass
class Documented:
    """A file documented to its fixed point: its new text, what was added, what could not be."""

    text: str
    added: list[DocstringFill]
    unfilled: list[DocstringFill]


def document_to_fixed_point(denoiser: Denoiser, document: Document) -> Documented:
    """Document what is missing, then again what is still missing in the result, until a round
    adds nothing (at most one round per missing site)."""
    from infill.modes.docstrings import add_docstrings
    from infill.text.edits import apply_edits

    text, added, unfilled = document.text, [], []
    while True:
        sites = missing_docstrings(text, language=document.language)
        if not sites:
            return Documented(text, added, [])
        result = add_docstrings(denoiser, dataclasses.replace(document, text=text), sites)
        unfilled = [fill for fill in result.fills if fill.edit is None]
        if not result.edits:
            return Documented(text, added, unfilled)
        text = apply_edits(text, result.edits)
        added += [fill for fill in result.fills if fill.edit is not None]


def document_file(path: Path, document: Document, backend: Backend, check: bool) -> bool:
    """Write the documentation the model gives (or, with `check`, report it); whether the file
    changed (would change). The sites it could not document are reported either way."""
    done = document_to_fixed_point(backend.get(), document)
    what = document.language.doc_noun
    for fill in done.unfilled:
        print(f"{path}:{fill.site.line}: {fill.site.name}: no {what} written ({fill.reason})")
    new_text = done.text
    if new_text == document.text:
        return False
    names = ", ".join(f"{fill.site.name}" for fill in done.added)
    count = len(done.added)
    if check:
        print(f"{path}: would add {count} {what}(s): {names}")
    else:
        write_atomic(path, document.encode(new_text))
        print(f"{path}: added {count} {what}(s): {names}")
    return True


def run(args: argparse.Namespace) -> int:
    backend = Backend(args.model, args.threads)
    changed, failed = [], []
    for path in args.files:
        document = readable(path)
        if document is None:
            print(f"infill-docstrings: {path}: no extension, and no #! line naming a language; skipped",
                  file=sys.stderr)  # fmt: skip
            continue
        if isinstance(document, str):
            print(f"infill-docstrings: {document}", file=sys.stderr)
            failed.append(path)
            continue
        sites = missing_docstrings(document.text, language=document.language)
        if sites and document_file(path, document, backend, args.check):
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
