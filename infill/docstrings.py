"""Document mode: write a docstring for each function or class that lacks one.

A definition without a docstring (found with tree-sitter, as in `infill.spans`) gets an
insertion site right after its header line; the model fills the text between fixed quotes:

    def area(w, h):                      def area(w, h):
        return w * h          canvas:        \"\"\"<mask x budget>\"\"\"
                                             return w * h

A one-line definition (``def f(): return 1``) has its body moved to a line of its own below
the docstring. The indentation is the body's own (tabs stay tabs), and line endings are the
file's.

What the model writes is made into a well-formed literal before anything is inserted: it is cut
at the first ``\"\"\"`` (the model meant to close the string there), characters that are not
printable (other than newline and tab) are dropped, surrounding blank space is stripped, a
multi-line text gets PEP 257 layout (summary on the first line, the rest re-indented to the
body, closing quotes on their own line), a text with a backslash gets an ``r`` prefix (PEP 257)
and no trailing backslash, and a text ending in a quote gets a space before the closing quotes.
The literal must then parse on its own as a string, and if the file parsed before, it must parse
after the insertion. A site whose text comes out empty, or fails those checks, gets no edit and
a reason instead: this mode never inserts text the model did not write.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import textwrap
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tree_sitter

from infill.document import Document
from infill.edits import TextEdit, apply_edits, minimal_edit
from infill.spans import (
    Span,
    _char_offset,
    _definition_name,
    _definitions,
    _docstring,
    _with_decorators,
    parse_tree,
)
from infill.window import fits_one_window, window_around

if TYPE_CHECKING:  # finding sites needs no torch (the language server lists them): see add_docstrings
    from infill.backend import Denoiser
    from infill.canvas import Canvas
    from infill.engine import InfillOptions
    from infill.sampler import SampleStats, Step

DOCSTRING_BUDGET = 32  # masked positions per docstring unless the options set a budget
QUOTES = '"""'


@dataclass(frozen=True)
class DocstringSite:
    """Where a definition's docstring goes: text[start:end] is replaced by the quoted docstring.

    Usually start == end, the end of the header line. For a one-line definition, [start, end)
    is the blank between the ':' and the body, and the body moves to the next line.
    """

    name: str  # e.g. "function Cls.method", "class Outer.Inner"
    line: int  # 1-based line of the `def` / `class` keyword
    start: int
    end: int
    indent: str  # the body's indentation
    one_line: bool

    def before(self, newline: str) -> str:
        """What goes before the docstring literal: a line break and the body's indentation."""
        return newline + self.indent

    def after(self, newline: str) -> str:
        """What goes after it: nothing, or for a one-line definition the body's new line start."""
        return newline + self.indent if self.one_line else ""


@dataclass
class DocstringFill:
    site: DocstringSite
    docstring: str | None  # the inserted literal, quotes included; None when nothing was inserted
    edit: TextEdit | None
    reason: str | None  # why nothing was inserted (None when something was)


@dataclass
class DocstringResult:
    fills: list[DocstringFill]
    stats: SampleStats

    @property
    def edits(self) -> list[TextEdit]:
        return [fill.edit for fill in self.fills if fill.edit is not None]


# --------------------------------------------------------------------------- finding sites


def missing_docstrings(text: str, within: Sequence[Span] | None = None) -> list[DocstringSite]:
    """Every function and class without a docstring, in source order, at any depth.

    within: keep only the definitions whose header (decorators to ':') overlaps one of these
    spans (an empty span: contains its offset); None keeps them all.
    """
    return [
        site for site, header in _missing(text)
        if within is None or any(_overlaps(header, (s.start, s.end)) for s in within)
    ]  # fmt: skip


@functools.lru_cache(maxsize=4)
def _missing(text: str) -> tuple[tuple[DocstringSite, tuple[int, int]], ...]:
    """Every site of :func:`missing_docstrings` with its header's range, once per text (a
    language server lists actions for the same text again and again; 2,000 sites of a
    20,000-line file take a tenth of a second)."""
    data, root = parse_tree(text)
    found = []
    for node in _definitions(root):
        site = _site(text, data, node) if _docstring(node) is None else None
        if site is not None:
            found.append((site, (_char_offset(data, _with_decorators(node).start_byte), site.start)))
    return tuple(found)


def missing_docstring_at(text: str, offset: int) -> DocstringSite | None:
    """The site of the innermost definition around `offset` (decorators to its end), or None if
    there is none or it already has a docstring."""
    data, root = parse_tree(text)
    target = len(text[:offset].encode("utf-8", "surrogatepass"))
    around = [
        n for n in _definitions_around(root, target) if _with_decorators(n).start_byte <= target <= n.end_byte
    ]
    if not around:
        return None
    innermost = max(around, key=lambda node: node.start_byte)
    return _site(text, data, innermost) if _docstring(innermost) is None else None


def _definitions_around(root: tree_sitter.Node, target: int) -> list[tree_sitter.Node]:
    """The function and class definitions whose nodes (decorators included) hold byte ``target``
    or end there: the ancestors of the nodes at ``target`` and just before it (not a query over
    the whole tree)."""
    found = []
    for at in {target, max(0, target - 1)}:
        node = root.descendant_for_byte_range(at, at)
        while node is not None:
            if node.type == "decorated_definition":
                node = node.child_by_field_name("definition") or node
            if node.type in ("function_definition", "class_definition"):
                if node not in found:
                    found.append(node)
                node = _with_decorators(node)
            node = node.parent
    return found


def _overlaps(header: tuple[int, int], span: tuple[int, int]) -> bool:
    if span[0] == span[1]:
        return header[0] <= span[0] <= header[1]
    return header[0] < span[1] and span[0] < header[1]


def _site(text: str, data: bytes, node: tree_sitter.Node) -> DocstringSite | None:
    """The insertion site of a definition; None if tree-sitter could not make sense of it."""
    body = node.child_by_field_name("body")
    colons = [child for child in node.children if child.type == ":"]
    if body is None or not colons or node.has_error:
        return None
    colon_end = _char_offset(data, colons[-1].end_byte)
    body_start = _char_offset(data, body.start_byte)
    line = node.start_point.row + 1
    if body.start_point.row == colons[-1].end_point.row:  # def f(): return 1
        indent = _leading_blank(text, _char_offset(data, node.start_byte)) + _indent_unit(text)
        return DocstringSite(_definition_name(node), line, colon_end, body_start, indent, True)
    line_end = text.find("\n", colon_end)
    line_end = len(text) if line_end == -1 else line_end - (text[line_end - 1] == "\r")
    indent = _leading_blank(text, body_start)
    return DocstringSite(_definition_name(node), line, line_end, line_end, indent, False)


def _leading_blank(text: str, offset: int) -> str:
    """The spaces and tabs that start the line `offset` is on."""
    start = text.rfind("\n", 0, offset) + 1
    line = text[start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_unit(text: str) -> str:
    """A tab if more lines are indented with tabs than with spaces, else four spaces."""
    lines = text.split("\n")
    tabs = sum(line.startswith("\t") for line in lines)
    return "\t" if tabs > sum(line.startswith(" ") for line in lines) else "    "


# --------------------------------------------------------------------------- filling them


def insertion_layout(document: Document, sites: Sequence[DocstringSite]) -> tuple[Document, list[Span]]:
    """The document with every site's quotes in place, and the empty span between each pair of
    quotes that the model fills (in the returned document's offsets)."""
    pieces, spans, position, shift = [], [], 0, 0
    for site in sorted(sites, key=lambda s: s.start):
        opening = site.before(document.newline) + QUOTES
        closing = QUOTES + site.after(document.newline)
        pieces += [document.text[position : site.start], opening, closing]
        at = site.start + shift + len(opening)
        spans.append(Span(at, at, f"docstring of {site.name}"))
        shift += len(opening) + len(closing) - (site.end - site.start)
        position = site.end
    pieces.append(document.text[position:])
    return dataclasses.replace(document, text="".join(pieces)), spans


def add_docstrings(
    denoiser: Denoiser,
    document: Document,
    sites: Sequence[DocstringSite],
    options: InfillOptions | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    on_site: Callable[[int, int], None] | None = None,
) -> DocstringResult:
    """Have the model write a docstring at each site: the sites near each other as one infill
    request on the window of the file around them (infill.window: only that is tokenized and
    parsed, so a whole-file job costs what its windows cost, not the file once per site).

    ``on_site(done, total)`` is called before each group of sites; ``cancelled()`` is checked
    there too (and by the sampler before every step): Cancelled.
    """
    from infill.engine import InfillOptions, infill
    from infill.errors import Cancelled
    from infill.sampler import MULTI_LINE_STEPS, SampleStats, merge_stats

    options = options or InfillOptions()
    sites = sorted(sites, key=lambda s: s.start)
    if not sites:
        return DocstringResult([], SampleStats(0, 0, 0, 0, 0.0, converged=True))
    if options.budget is None:
        options = dataclasses.replace(options, budget=DOCSTRING_BUDGET)
    # _keep_parsing mends a docstring's quotes: no token edits (and, at an insertion point, the
    # engine gives no fresh fills)
    options = dataclasses.replace(options, syntax_edits=0)
    if options.sampler.steps is None:  # an insertion point, but a docstring may take several lines
        sampler = dataclasses.replace(options.sampler, steps=MULTI_LINE_STEPS)
        options = dataclasses.replace(options, sampler=sampler)
    context = options.context_length or denoiser.context_length
    fills: list[DocstringFill] = []
    stats = []
    # A file the model sees whole: one request. Else runs of nearby sites, each on its own window
    # (not one request over the file: that would tokenize all of it, once per canvas tried).
    groups = [list(sites)] if fits_one_window(document.text, context) else _groups(sites, context)
    for group in groups:
        if cancelled is not None and cancelled():
            raise Cancelled("cancelled between docstrings")
        if on_site is not None:
            on_site(len(fills), len(sites))
        window = window_around(document.text, group[0].start, group[-1].end, context)
        part = window.document(document)
        moved = [
            dataclasses.replace(s, start=s.start - window.start, end=s.end - window.start) for s in group
        ]
        layout, spans = insertion_layout(part, moved)
        filled = infill(denoiser, layout, spans, options, on_step, cancelled)
        for site, here, result in zip(group, moved, filled.spans, strict=True):
            fill = _fill(part, here, result.new_text)
            edit = None if fill.edit is None else window.edit(fill.edit)
            fills.append(DocstringFill(site, fill.docstring, edit, fill.reason))
        stats.append(filled.stats)
    return DocstringResult(_keep_parsing(document.text, fills), merge_stats(stats))


def _groups(sites: Sequence[DocstringSite], context: int) -> list[list[DocstringSite]]:
    """Runs of sites near enough to be filled on one canvas (within about half the context)."""
    reach, most = max(64, context * 2), max(1, context // (2 * DOCSTRING_BUDGET))
    groups: list[list[DocstringSite]] = []
    for site in sites:
        if groups and site.end - groups[-1][0].start <= reach and len(groups[-1]) < most:
            groups[-1].append(site)
        else:
            groups.append([site])
    return groups


def _fill(document: Document, site: DocstringSite, written: str) -> DocstringFill:
    literal = docstring_literal(written, site.indent)
    if literal is None:
        return DocstringFill(site, None, None, "the model wrote no usable docstring text")
    insertion = document.adapt_newlines(site.before("\n") + literal + site.after("\n"))
    edit = minimal_edit(document.text, site.start, site.end, insertion)
    return DocstringFill(site, document.adapt_newlines(literal), edit, None)


def docstring_literal(written: str, indent: str) -> str | None:
    """The model's text made into a docstring literal, quotes included, for a body indented by
    `indent` (see the module docstring); None if no text is left or it would not be a valid
    string literal. Line endings are "\n"."""
    text = written.replace("\r\n", "\n").split(QUOTES)[0]
    text = "".join(c for c in text if c in "\n\t" or c.isprintable()).strip()
    lines = [line.rstrip() for line in text.split("\n")]
    if len(lines) > 1:  # PEP 257: summary line, the rest at the body's indentation, closing line
        rest = textwrap.dedent("\n".join(lines[1:])).split("\n")
        body = "\n".join([lines[0]] + [indent + line if line else "" for line in rest] + [indent])
    else:
        body = text.rstrip("\\")  # a trailing backslash would escape the closing quotes
        body += " " if body.endswith('"') else ""
    if not body:
        return None
    literal = ("r" if "\\" in body else "") + QUOTES + body + QUOTES
    return literal if _is_string_literal(literal) else None


def _is_string_literal(literal: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(literal)
    except (SyntaxError, ValueError):
        return False
    statement = tree.body[0] if len(tree.body) == 1 else None
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _keep_parsing(text: str, fills: list[DocstringFill]) -> list[DocstringFill]:
    """If `text` parses, drop the edits (one by one, if all together fail) after which it would not."""
    edits = [fill.edit for fill in fills if fill.edit is not None]
    if not edits or not _parses(text) or _parses(apply_edits(text, edits)):
        return fills
    return [
        fill
        if fill.edit is None or _parses(apply_edits(text, [fill.edit]))
        else DocstringFill(fill.site, None, None, "the file would not parse with this docstring")
        for fill in fills
    ]
