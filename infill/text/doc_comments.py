"""Documentation comments: each language's convention, where one is missing, and how it is written.

Python's docstrings go inside the definition (infill.text.docstring_sites); every other language of the
table (infill.text.languages) documents a declaration with a comment right above it, on lines of its
own at the declaration's indentation (tabs stay tabs):

    jsdoc    JavaScript, TypeScript   /** Sums the shapes' areas. */      (several lines: /**, " * ", */)
    javadoc  Java                     /** ... */ as JSDoc
    doxygen  C, C++                   /** ... */ as JSDoc (an existing ``///`` or ``/*!`` counts too)
    rustdoc  Rust                     /// Adds count items.                (each line ``///``)
    go       Go                       // Distance returns ...              (each line ``//``; the first
                                      starts with the declaration's name; exported declarations only)

A file documents itself too where its row has a ``module_docs`` convention: Rust's ``//!``
(rustdoc-inner). The inner doc comment goes first in the file, as the Rust reference requires
(before any item) and as std and rustfmt'd crates write it (before the ``#![attributes]`` too):
after a ``#!`` line and a header comment (a licence: comments a blank line separates from what
follows), followed by a blank line.

A declaration *has* its documentation when a comment of the convention ends on the line just
above it (a blank line detaches it); Go counts any comment there, Rust looks above its
``#[attributes]``. A Rust file has its own when a ``//!``, ``/*!`` or ``#![doc ...]`` comes before
its first item. On the canvas the model fills the text between the comment's opening (``/** ``,
``/// ``, ``// Name ``) and its closing (`` */``); :func:`render` then lays the text out as the
convention wants, or gives None when no usable text is left (the model's own comment closer
ends the text).
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from infill.text import definitions as defs
from infill.text.languages import Language


@dataclass(frozen=True)
class Convention:
    """How one family of languages writes documentation comments."""

    opener: str  # on the canvas, before the model's text ("{name}": the declaration's name)
    closer: str  # after it
    line_prefix: str  # before each line of a multi-line comment, after the indentation
    documented_by: tuple[str, ...]  # what a comment directly above must start with to count
    block: bool  # /** ... */ (else one line comment per line)
    exported_only: bool = False  # Go: only exported (capitalised) declarations are documented


_BLOCK = dict(opener="/** ", closer=" */", line_prefix=" * ", block=True)

CONVENTIONS = {
    "jsdoc": Convention(documented_by=("/**",), **_BLOCK),
    "javadoc": Convention(documented_by=("/**",), **_BLOCK),
    "doxygen": Convention(documented_by=("/**", "/*!", "///", "//!"), **_BLOCK),
    "rustdoc": Convention("/// ", "", "/// ", ("///", "/**"), block=False),
    "rustdoc-inner": Convention("//! ", "", "//! ", ("//!", "/*!", "#![doc"), block=False),
    "go": Convention("// {name} ", "", "// ", ("//", "/*"), block=False, exported_only=True),
}


def convention_of(language: Language) -> Convention | None:
    """The language's comment convention; None for Python (docstrings) and plain text."""
    return CONVENTIONS.get(language.docs or "")


def module_convention_of(language: Language) -> Convention | None:
    """The convention of a file's own documentation (Rust's ``//!``); None where there is none."""
    return CONVENTIONS.get(language.module_docs or "")


_FILE_HEADER = frozenset({"shebang", "inner_attribute_item"})
"""What may come before a Rust file's first item besides comments: a ``#!`` line, ``#![...]``."""


def module_top(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """The node a file's own documentation goes above: the first one after its ``#!`` line and
    its header comments (blocks of plain comments a blank line separates from what follows); a
    comment attached to what follows stays with it. None if the file has nothing else."""
    nodes = [node for node in root.named_children if node.type != "shebang"]
    first = 0
    while first < len(nodes) and _is_plain_comment(nodes[first]):
        last = first
        while last + 1 < len(nodes) and _is_plain_comment(nodes[last + 1]):
            if not _just_above(nodes[last], nodes[last + 1]):
                break
            last += 1
        if last + 1 < len(nodes) and _just_above(nodes[last], nodes[last + 1]):
            return nodes[first]  # no blank line: the comments belong to what follows
        first = last + 1
    return nodes[first] if first < len(nodes) else None


def _is_plain_comment(node: tree_sitter.Node) -> bool:
    return "comment" in node.type and not defs.node_text(node).startswith(("///", "//!", "/**", "/*!"))


def module_is_documented(root: tree_sitter.Node, convention: Convention) -> bool:
    """Whether the file has its own documentation before its first item (``//!``, ``/*!``,
    ``#![doc = ...]``)."""
    for node in root.named_children:
        if "comment" not in node.type and node.type not in _FILE_HEADER:
            return False
        text = defs.node_text(node)
        if node.type == "inner_attribute_item":
            text = "".join(text.split())  # #![ doc = "..." ]
        if text.startswith(convention.documented_by):
            return True
    return False


def anchor(node: tree_sitter.Node, language: Language) -> tree_sitter.Node:
    """The node the documentation goes above: the definition with its wrapper (``export``,
    decorators), widened to the declaration that starts on its line (a C ``typedef struct``)."""
    found = defs.outer(node, language)
    while (
        found.parent is not None
        and found.parent.type not in language.blocks
        and found.parent.start_point.row == found.start_point.row
    ):
        found = found.parent
    return found


def first_line_above(node: tree_sitter.Node) -> tree_sitter.Node:
    """The node to insert above: the declaration, or the first of its Rust attributes."""
    first, above = node, node.prev_named_sibling
    while above is not None and above.type == "attribute_item" and _just_above(above, first):
        first, above = above, above.prev_named_sibling
    return first


def comment_above(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The comment that ends on the line just above ``node`` (Rust: above its attributes)."""
    first = first_line_above(node)
    above = first.prev_named_sibling
    return above if above is not None and "comment" in above.type and _just_above(above, first) else None


def _just_above(above: tree_sitter.Node, node: tree_sitter.Node) -> bool:
    """Whether ``above`` ends on the line before ``node`` (a Rust line comment takes in its line
    break: it ends at column 0 of the next line)."""
    end_row = above.end_point.row - (above.end_point.column == 0)
    return end_row == node.start_point.row - 1


def is_documented(node: tree_sitter.Node, convention: Convention) -> bool:
    comment = comment_above(node)
    if comment is None:
        return False
    text = defs.node_text(comment).lstrip()
    return text.startswith(convention.documented_by)


def wants_documentation(node: tree_sitter.Node, convention: Convention, language: Language) -> bool:
    """Whether the convention documents this definition: Go's exported names only; a function
    bound to a name (``export const f = (a) => ...``) where its declaration holds it alone and
    is not inside a function (a ``const`` helper in a function body is a local variable)."""
    if convention.exported_only and not defs.name_of(node)[:1].isupper():
        return False
    if defs.bound_function(node, language) is not None:
        top = defs.outer(node, language)
        return top != node and not _inside_a_function(top, language)
    return True


def _inside_a_function(node: tree_sitter.Node, language: Language) -> bool:
    functions = language.functions | language.function_values
    parent = node.parent
    while parent is not None and parent.type not in functions:
        parent = parent.parent
    return parent is not None


def opener(convention: Convention, name: str) -> str:
    return convention.opener.format(name=name)


def render(convention: Convention, written: str, indent: str, name: str) -> str | None:
    """The comment for the model's text (after the opener), lines joined by "\\n", its first line
    not indented (it goes where the opener went) and the others at ``indent``; None if no text."""
    text = written.replace("\r\n", "\n").replace("\r", "\n")
    if convention.block:
        text = text.split("*/")[0]
    lines = ["".join(c for c in line if c == "\t" or c.isprintable()).strip() for line in text.split("\n")]
    lines = [_without_prefix(line, convention) for line in lines]
    lines = [line for i, line in enumerate(lines) if line or (i > 0 and lines[i - 1])]  # one blank at most
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    if not lines:
        return None
    first_opener = opener(convention, name)
    if convention.block:
        if len(lines) == 1:
            return f"{first_opener}{lines[0]}{convention.closer}"
        body = [f"{indent}{convention.line_prefix}{line}".rstrip() for line in lines]
        return "\n".join([first_opener.rstrip(), *body, f"{indent}{convention.closer.strip().rjust(3)}"])
    rest = [f"{indent}{convention.line_prefix}{line}".rstrip() for line in lines[1:]]
    return "\n".join([f"{first_opener}{lines[0]}", *rest])


def _without_prefix(line: str, convention: Convention) -> str:
    """A line without the comment marks the model may have written itself (" * ", "/// ")."""
    for mark in ("///", "//!", "//", "/**", "*"):
        if line.startswith(mark) and (convention.block or mark != "*"):
            return line[len(mark) :].strip()
    return line
