"""Document mode: write a docstring (in other languages: a documentation comment, in the
language's convention, infill.text.doc_comments) for each function or class that lacks one.

    plan:   the sites (infill.text.docstring_sites) near each other as one job (a file the model
            sees whole: one job), so that the pipeline stages each run of sites on the window of
            the file around it (infill.engine.pipeline.in_window: only that is tokenized and
            parsed, so a whole-file request costs what its windows cost); in each window the
            quotes are put in place (`quotes_in_place`) and the model fills the empty span
            between them:

                def area(w, h):                      def area(w, h):
                    return w * h          canvas:        \"\"\"<mask x budget>\"\"\"
                                                         return w * h

    repair: syntax retries only (a docstring's quotes are mended below, not by token edits;
            an insertion point gets no fresh fills)
    edits:  the model's text made into a well-formed literal, or no edit and a reason

What the model writes is made into a well-formed literal before anything is inserted: it is cut
at the first ``\"\"\"`` (the model meant to close the string there), characters that are not
printable (other than newline and tab) are dropped, surrounding blank space is stripped, a
multi-line text gets PEP 257 layout (summary on the first line, the rest re-indented to the
body, closing quotes on their own line), a text with a backslash gets an ``r`` prefix (PEP 257)
and no trailing backslash, and a text ending in a quote gets a space before the closing quotes.
The literal must then parse on its own as a string, and if the file parsed before, it must parse
after the insertion. A site whose text comes out empty, or fails those checks, gets no edit and
a reason instead: this mode never inserts text the model did not write. Line endings are the
file's. A documentation comment is laid out by its convention (infill.text.doc_comments.render) and
must leave a file that parsed parsing with its own grammar.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from infill.engine.canvas import Canvas
from infill.engine.pipeline import Filled, Hooks, Job, RequestStats, jobs_of, run
from infill.engine.repair import RepairPolicy
from infill.engine.results import Step
from infill.options import MULTI_LINE_STEPS, InfillOptions
from infill.text import doc_comments
from infill.text.docstring_sites import DocstringSite
from infill.text.document import Document
from infill.text.edits import TextEdit, apply_edits, minimal_edit
from infill.text.languages import PYTHON, Language
from infill.text.spans import Span
from infill.text.syntax import has_syntax_error, parse_python
from infill.text.window import fits_one_window

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

DOCSTRING_BUDGET = 32  # masked positions per docstring unless the options set a budget
QUOTES = '''"""'''


@dataclass
class DocstringFill:
    site: DocstringSite
    docstring: str | None  # the inserted literal, quotes included; None when nothing was inserted
    edit: TextEdit | None
    reason: str | None  # why nothing was inserted (None when something was)


@dataclass
class DocstringResult:
    fills: list[DocstringFill]
    stats: RequestStats

    @property
    def edits(self) -> list[TextEdit]:
        return [fill.edit for fill in self.fills if fill.edit is not None]


@dataclass
class DocstringRequest:
    document: Document
    sites: Sequence[DocstringSite]
    options: InfillOptions = field(default_factory=InfillOptions)

    def plan(self, denoiser: Denoiser) -> list[Job]:
        options = self.options
        sites = sorted(self.sites, key=lambda s: s.start)
        if not sites:
            return []
        budget = DOCSTRING_BUDGET if options.budget is None else options.budget
        sampler = options.sampler
        if sampler.steps is None:  # an insertion point, but a docstring may take several lines
            sampler = dataclasses.replace(sampler, steps=MULTI_LINE_STEPS)
        # _keep_parsing mends a docstring's quotes: no token edits
        policy = RepairPolicy.of(options, token_edits=0)
        context = options.context_length or denoiser.context_length
        # A file the model sees whole: one job. Else runs of nearby sites, a job each, so that each
        # run is staged on the window around it (infill.engine.pipeline.in_window) and not all of
        # them on one window as wide as the file (that would tokenize it all, once per canvas tried).
        groups = [sites] if fits_one_window(self.document.text, context) else _groups(sites, context)
        return [
            Job(self.document, [Span(s.start, s.end, f"documentation of {s.name}") for s in group],
                sampler, policy, budget, options.context_length, context=group,
                layout=partial(quotes_in_place, sites=group))
            for group in groups
        ]  # fmt: skip

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> DocstringResult:
        fills: list[DocstringFill] = []
        for job in jobs_of(filled):
            sites: list[DocstringSite] = job.context
            written = [text for part in filled if part.job is job for text in part.texts[0]]
            fills += [_fill(self.document, site, text) for site, text in zip(sites, written, strict=True)]
        return DocstringResult(_keep_parsing(self.document, fills), stats)


def add_docstrings(
    denoiser: Denoiser,
    document: Document,
    sites: Sequence[DocstringSite],
    options: InfillOptions | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    on_site: Callable[[int, int], None] | None = None,
) -> DocstringResult:
    """Have the model write a docstring at each site: `run` on a DocstringRequest.

    ``on_site(done, total)`` is called before each group of sites; ``cancelled()`` is checked
    before each canvas (and by the sampler before every step): Cancelled.
    """
    request = DocstringRequest(document, sites, options or InfillOptions())
    return run(denoiser, request, Hooks(on_step, cancelled, on_site))


def quotes_in_place(
    document: Document, spans: list[Span], sites: Sequence[DocstringSite]
) -> tuple[Document, list[Span]]:
    """A job's layout (infill.engine.pipeline.Job.layout): `document` (the job's window) with the
    quotes of `sites` in place, `spans` being the sites' ranges in its offsets."""
    moved = [
        dataclasses.replace(site, start=span.start, end=span.end)
        for site, span in zip(sites, spans, strict=True)
    ]
    return insertion_layout(document, moved)


def insertion_layout(document: Document, sites: Sequence[DocstringSite]) -> tuple[Document, list[Span]]:
    """The document with every site's quotes in place, and the empty span between each pair of
    quotes that the model fills (in the returned document's offsets)."""
    pieces, spans, position, shift = [], [], 0, 0
    for site in sorted(sites, key=lambda s: s.start):
        opening = site.before(document.newline) + site.opener
        closing = site.closer + site.after(document.newline)
        pieces += [document.text[position : site.start], opening, closing]
        at = site.start + shift + len(opening)
        spans.append(Span(at, at, f"documentation of {site.name}"))
        shift += len(opening) + len(closing) - (site.end - site.start)
        position = site.end
    pieces.append(document.text[position:])
    return dataclasses.replace(document, text="".join(pieces)), spans


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
    if site.is_comment:
        convention = doc_comments.CONVENTIONS[site.style]
        literal = doc_comments.render(convention, written, site.indent, site.own_name)
    else:
        literal = docstring_literal(written, site.indent)
    if literal is None:
        noun = "doc comment" if site.is_comment else "docstring"
        return DocstringFill(site, None, None, f"the model wrote no usable {noun} text")
    insertion = document.adapt_generated(site.before("\n") + literal + site.after("\n"))
    edit = minimal_edit(document.text, site.start, site.end, insertion)
    return DocstringFill(site, document.adapt_generated(literal), edit, None)


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
        tree = parse_python(literal)
    except (SyntaxError, ValueError):
        return False
    statement = tree.body[0] if len(tree.body) == 1 else None
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _parses(text: str, language: Language = PYTHON) -> bool:
    if language is not PYTHON:
        return not has_syntax_error(text, language)
    try:
        parse_python(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _keep_parsing(document: Document, fills: list[DocstringFill]) -> list[DocstringFill]:
    """If the document parses, drop the edits (one by one, if all together fail) after which it
    would not."""
    text, language = document.text, document.language
    edits = [fill.edit for fill in fills if fill.edit is not None]
    if not edits or not _parses(text, language) or _parses(apply_edits(text, edits), language):
        return fills
    return [
        fill
        if fill.edit is None or _parses(apply_edits(text, [fill.edit]), language)
        else DocstringFill(fill.site, None, None, f"the file would not parse with this {language.doc_noun}")
        for fill in fills
    ]
