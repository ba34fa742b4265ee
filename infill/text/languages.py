"""The languages infill knows: one row per language, and how a file's language is found.

A row says where the language's tree-sitter grammar comes from (an official ``tree-sitter-<lang>``
wheel, pinned in pyproject.toml: no grammar is downloaded at run time), which file extensions
and LSP languageIds name it, which syntax nodes the ``--node`` selectors mean there, its comment
syntax and its documentation convention (infill.text.doc_comments). Adding a language is one row here
and its grammar's pin.

    function:NAME   a node of ``functions`` (methods too), or a ``declarators`` node binding a name
                    to one of ``function_values`` (JavaScript's ``const f = (a) => a``), wrapped by
                    a ``wrappers`` node if any (Python's decorators, JavaScript's ``export`` and
                    ``const``, C++'s ``template``)
    class:NAME      a node of ``classes`` (classes, interfaces, structs, impl blocks, ...)
    body:NAME       the body of either: Python's indented block, or what is between the braces
    statement:LINE  a named node (not a comment) directly inside a ``blocks`` node

A file's language comes from an explicit name (``--language``, an editor's languageId), else
from its extension (or a ``#!`` line). A language without a row, or whose grammar fails to load,
is :data:`TEXT`: lines and ranges are filled, but there are no node selectors, syntax checks or
syntax repair.

This module does not import tree-sitter until a grammar is loaded (the training code reads
documents without it).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter


class GrammarError(Exception):
    """A language's grammar could not be loaded (the wheel is missing or broken)."""


@dataclass(frozen=True)
class Language:
    """One row of the table (see the module docstring)."""

    name: str  # infill's name for it, also accepted by --language: "typescript"
    title: str  # for messages: "TypeScript"
    grammar: tuple[str, str] | None  # (module, function) of the grammar wheel; None: plain text
    extensions: tuple[str, ...] = ()
    language_ids: tuple[str, ...] = ()  # LSP languageIds (VS Code's, Neovim's filetypes)
    functions: frozenset[str] = frozenset()
    classes: frozenset[str] = frozenset()
    declarators: frozenset[str] = frozenset()  # bind a name to a value (``f = (a) => a``)...
    function_values: frozenset[str] = frozenset()  # ...that is a function when it is one of these
    wrappers: frozenset[str] = frozenset()
    blocks: frozenset[str] = frozenset()
    line_comment: str | None = None  # "//", "#"
    docs: str | None = None  # the documentation convention: a key of infill.text.doc_comments.CONVENTIONS
    module_docs: str | None = None  # a file's own documentation (Rust's //!): a key of the same

    @property
    def has_grammar(self) -> bool:
        return self.grammar is not None

    @property
    def doc_noun(self) -> str:
        """What its documentation is called in titles and messages: "docstring" (Python), else
        "doc comment" (JSDoc, Javadoc, Doxygen, rustdoc, Go doc comments)."""
        return "docstring" if self.docs == "docstring" else "doc comment"


_C_FAMILY_BLOCKS = frozenset({"translation_unit", "compound_statement", "field_declaration_list"})

PYTHON = Language(
    "python", "Python", ("tree_sitter_python", "language"), (".py", ".pyi", ".pyw"), ("python",),
    functions=frozenset({"function_definition"}),
    classes=frozenset({"class_definition"}),
    wrappers=frozenset({"decorated_definition"}),
    blocks=frozenset({"module", "block"}),
    line_comment="#", docs="docstring",
)  # fmt: skip

JAVASCRIPT = Language(
    "javascript", "JavaScript", ("tree_sitter_javascript", "language"),
    (".js", ".mjs", ".cjs", ".jsx"), ("javascript", "javascriptreact", "jsx"),
    functions=frozenset({"function_declaration", "generator_function_declaration", "method_definition"}),
    classes=frozenset({"class_declaration"}),
    declarators=frozenset({"variable_declarator"}),
    function_values=frozenset({"arrow_function", "function_expression", "generator_function"}),
    wrappers=frozenset({"export_statement", "lexical_declaration", "variable_declaration"}),
    blocks=frozenset({"program", "statement_block", "class_body", "switch_body"}),
    line_comment="//", docs="jsdoc",
)  # fmt: skip

_TS_FUNCTIONS = JAVASCRIPT.functions | {"function_signature", "method_signature", "abstract_method_signature"}
_TS_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "interface_declaration",
                         "enum_declaration"})  # fmt: skip
_TS_BLOCKS = JAVASCRIPT.blocks | {"interface_body", "enum_body"}

TYPESCRIPT = Language(
    "typescript", "TypeScript", ("tree_sitter_typescript", "language_typescript"),
    (".ts", ".mts", ".cts"), ("typescript",),
    functions=_TS_FUNCTIONS, classes=_TS_CLASSES, declarators=JAVASCRIPT.declarators,
    function_values=JAVASCRIPT.function_values, wrappers=JAVASCRIPT.wrappers, blocks=_TS_BLOCKS,
    line_comment="//", docs="jsdoc",
)  # fmt: skip

TSX = Language(
    "tsx", "TSX", ("tree_sitter_typescript", "language_tsx"), (".tsx",), ("typescriptreact", "tsx"),
    functions=_TS_FUNCTIONS, classes=_TS_CLASSES, declarators=JAVASCRIPT.declarators,
    function_values=JAVASCRIPT.function_values, wrappers=JAVASCRIPT.wrappers, blocks=_TS_BLOCKS,
    line_comment="//", docs="jsdoc",
)  # fmt: skip

GO = Language(
    "go", "Go", ("tree_sitter_go", "language"), (".go",), ("go",),
    functions=frozenset({"function_declaration", "method_declaration"}),
    classes=frozenset({"type_declaration"}),
    blocks=frozenset({"source_file", "statement_list", "field_declaration_list", "interface_type"}),
    line_comment="//", docs="go",
)  # fmt: skip

RUST = Language(
    "rust", "Rust", ("tree_sitter_rust", "language"), (".rs",), ("rust",),
    functions=frozenset({"function_item", "function_signature_item"}),
    classes=frozenset({"struct_item", "enum_item", "union_item", "impl_item", "trait_item"}),
    blocks=frozenset({"source_file", "block", "declaration_list", "field_declaration_list",
                      "enum_variant_list"}),
    line_comment="//", docs="rustdoc", module_docs="rustdoc-inner",
)  # fmt: skip

JAVA = Language(
    "java", "Java", ("tree_sitter_java", "language"), (".java",), ("java",),
    functions=frozenset({"method_declaration", "constructor_declaration"}),
    classes=frozenset({"class_declaration", "interface_declaration", "enum_declaration",
                       "record_declaration"}),
    blocks=frozenset({"program", "block", "class_body", "interface_body", "enum_body",
                      "constructor_body"}),
    line_comment="//", docs="javadoc",
)  # fmt: skip

C = Language(
    "c", "C", ("tree_sitter_c", "language"), (".c", ".h"), ("c",),
    functions=frozenset({"function_definition"}),
    classes=frozenset({"struct_specifier", "union_specifier", "enum_specifier"}),
    blocks=_C_FAMILY_BLOCKS,
    line_comment="//", docs="doxygen",
)  # fmt: skip

CPP = Language(
    "cpp", "C++", ("tree_sitter_cpp", "language"),
    (".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++"), ("cpp", "c++", "cuda-cpp"),
    functions=frozenset({"function_definition"}),
    classes=frozenset({"class_specifier", "struct_specifier", "union_specifier", "enum_specifier"}),
    wrappers=frozenset({"template_declaration"}),
    blocks=_C_FAMILY_BLOCKS | {"declaration_list"},
    line_comment="//", docs="doxygen",
)  # fmt: skip

TEXT = Language("text", "plain text", None, (".txt",), ("plaintext", "text"))
"""Any other language: filled as text (lines and ranges; no node selectors, no syntax checks)."""

LANGUAGES: tuple[Language, ...] = (PYTHON, JAVASCRIPT, TYPESCRIPT, TSX, GO, RUST, JAVA, C, CPP)
"""The languages with a grammar, Python first."""

_SHEBANGS = {"python": PYTHON, "node": JAVASCRIPT, "deno": TYPESCRIPT}


@dataclass(frozen=True)
class Detected:
    """A file's language, and the one thing to say about it (None: nothing to say)."""

    language: Language
    notice: str | None = None


def named(name: str) -> Language | None:
    """The language called ``name`` (infill's name or an LSP languageId, any case), or None."""
    wanted = name.strip().lower()
    for language in (*LANGUAGES, TEXT):
        if wanted == language.name or wanted in language.language_ids:
            return language
    return None


def by_path(path: str | PurePath, first_line: str = "") -> Language | None:
    """The language of a file by its extension, else by its ``#!`` line; None if neither tells."""
    suffix = PurePath(path).suffix.lower()
    for language in (*LANGUAGES, TEXT):
        if suffix and suffix in language.extensions:
            return language
    if first_line.startswith("#!"):
        for program, language in _SHEBANGS.items():
            if program in first_line:
                return language
    return None


def detect(name: str | None, path: str | PurePath | None, first_line: str = "") -> Detected:
    """The language of a document: ``name`` if given (``--language``, a languageId), else by
    ``path``; text (with a notice saying so) when neither names a language with a grammar, or
    its grammar does not load."""
    if name:
        language = named(name)
        if language is None:
            return Detected(TEXT, f"no grammar for language {name!r} ({known()}): filled as text, "
                            "with no node selectors or syntax checks")  # fmt: skip
    else:
        language = by_path(path, first_line) if path is not None else None
        if language is None:
            what = f"{PurePath(path).name!r}" if path is not None else "this document"
            return Detected(TEXT, f"no language known for {what} ({known()}; or say which with "
                            "--language): filled as text, with no node selectors or syntax checks")
    if language.has_grammar:
        try:
            grammar(language)
        except GrammarError as error:
            return Detected(TEXT, f"{error}: filled as text, with no node selectors or syntax checks")
    return Detected(language)


def known() -> str:
    """The languages with a grammar, for messages."""
    return "known: " + ", ".join(language.name for language in LANGUAGES)


@functools.cache
def grammar(language: Language) -> tree_sitter.Language:
    """The tree-sitter grammar of ``language``, loaded once; GrammarError if it cannot be."""
    if language.grammar is None:
        raise GrammarError(f"{language.title} has no grammar")
    module_name, function = language.grammar
    try:
        import tree_sitter

        module = importlib.import_module(module_name)
        return tree_sitter.Language(getattr(module, function)())
    except (ImportError, AttributeError, OSError, ValueError, TypeError) as error:
        package = module_name.replace("_", "-")
        raise GrammarError(
            f"the {language.title} grammar ({package}) failed to load ({error}); "
            f'reinstall it with pip install -e "."'
        ) from None
