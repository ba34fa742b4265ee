"""Each mode's result as JSON: what `infill --json` prints and what a team server's /v1/infill
answers (team_server), so that both say the same thing in the same words.

    fill          json_report        edits, each span's new text, the request's stats
    fix           fix_report         edits, each span's new text, the flagged tokens, stats
    docstrings    docstring_report   edits, each docstring written and why, stats
    alternatives  candidates_report  one entry per candidate, best first: its score and edit
    review        review_report      the findings: line, column, text, expected, score; stats
    inline        inline_report      the distinct texts to insert at the cursor; stats

Edits carry offsets and 0-based line/character ranges (infill.text.edits.edits_to_json).

A client of a team server (infill.models.served: the CLI's --server, the language server's
`endpoint`) reads a report back into the mode's result (`result_of`), checked against the
document it sent: the same dataclasses the in-process run returns, so nothing downstream knows
where the model ran. What a report does not carry stays empty (the rows of a candidate, the
authors' protocol's tokens); a report that does not fit the document raises ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from infill.engine.pipeline import RequestStats
from infill.errors import InputError
from infill.modes.alternatives import AlternativesRequest, Candidate
from infill.modes.docstrings import DocstringFill, DocstringRequest, DocstringResult
from infill.modes.fill import FillRequest, InfillResult, SpanResult
from infill.modes.fix import FixRequest, FixResult, FlaggedToken, SpanFix
from infill.modes.inline import Completions, InlineRequest
from infill.modes.review import Finding, ReviewRequest, ReviewResult
from infill.text.document import Document
from infill.text.edits import TextEdit, edits_from_json, edits_to_json
from infill.text.spans import Span, position_offset


def json_report(document: Document, result: InfillResult) -> dict:
    stats = result.stats
    return {
        "edits": edits_to_json(document.text, result.edits),
        "spans": [
            {
                **span_entry(s.span, s.new_text, s.edit is not None),
                **(authors_tokens(s.tokens) if s.tokens is not None else {}),
            }
            for s in result.spans
        ],
        "stats": stats.__dict__,
    }


def span_entry(span: Span, new_text: str, changed: bool) -> dict:
    """A span of a fill's or a fix's report (`span_of` reads it back)."""
    return {"label": span.label, "start": span.start, "end": span.end, "new_text": new_text,
            "changed": changed}  # fmt: skip


def authors_tokens(by_step: list[list[int]]) -> dict:
    """--protocol authors: every id the loop committed, in order, and which step committed each."""
    return {"tokens": [t for step in by_step for t in step], "tokens_by_step": by_step}


def fix_report(document: Document, result: FixResult) -> dict:
    return {
        "edits": edits_to_json(document.text, result.edits),
        "spans": [span_entry(s.span, s.new_text, bool(s.edits)) for s in result.spans],
        "flagged": [token.__dict__ for token in result.flagged],
        "stats": result.stats.__dict__,
    }


def docstring_report(document: Document, result: DocstringResult) -> dict:
    return {
        "edits": edits_to_json(document.text, result.edits),
        "docstrings": [
            {"name": f.site.name, "line": f.site.line, "docstring": f.docstring, "reason": f.reason}
            for f in result.fills
        ],
        "stats": result.stats.__dict__,
    }


def candidates_report(document: Document, candidates: list[Candidate]) -> list[dict]:
    """The candidates, best first, each with its rank, score (mean log-probability) and edit."""
    return [{"rank": rank, "score": c.score, "new_text": c.new_text, "changed": c.edit is not None,
             "breaks_syntax": c.breaks_syntax,
             "edits": edits_to_json(document.text, [c.edit] if c.edit else [])}
            for rank, c in enumerate(candidates, 1)]  # fmt: skip


def review_report(result: ReviewResult) -> dict:
    """{"findings": [{"line", "column", "text", "expected", "score"}, ...], "stats": ...}."""
    return {"findings": [finding.to_json() for finding in result.findings], "stats": result.stats.__dict__}


def inline_report(completions: Completions) -> dict:
    return {"texts": list(completions.texts), "stats": completions.stats.__dict__}


# --------------------------------------------------------------------------- reading them back


def result_of(request: Any, report: Any) -> Any:
    """What a team server answered for `request` (its mode's report), as the mode's result."""
    document = request.document
    if isinstance(request, FillRequest):
        return fill_result(document, report, request.spans)
    if isinstance(request, FixRequest):
        return fix_result(document, report, request.spans)
    if isinstance(request, DocstringRequest):
        return docstring_result(document, request, report)
    if isinstance(request, AlternativesRequest):
        return candidates_of(document, report)
    if isinstance(request, ReviewRequest):
        return review_result(document, report)
    if isinstance(request, InlineRequest):
        return Completions(texts=strings(field_of(report, "texts", list)), stats=stats_of(report))
    raise ValueError(f"no report for a {type(request).__name__}")


def fill_result(document: Document, report: Any, asked: Sequence[Span] = ()) -> InfillResult:
    edits = edits_from_json(document.text, field_of(report, "edits", list))
    spans = []
    for item in field_of(report, "spans", list):
        span, new_text = span_of(document, item, asked), field_of(item, "new_text", str)
        mine = inside(span, edits) if item.get("changed") else []
        spans.append(SpanResult(span, new_text, mine[0] if mine else None))
    return InfillResult(spans, stats_of(report))


def fix_result(document: Document, report: Any, asked: Sequence[Span] = ()) -> FixResult:
    edits = edits_from_json(document.text, field_of(report, "edits", list))
    flagged = [FlaggedToken(**known(FlaggedToken, item)) for item in field_of(report, "flagged", list)]
    spans = []
    for item in field_of(report, "spans", list):
        span = span_of(document, item, asked)
        tokens = [t for t in flagged if span.start <= t.start and t.end <= span.end]
        spans.append(SpanFix(span, field_of(item, "new_text", str), inside(span, edits), tokens))
    return FixResult(spans, stats_of(report))


def docstring_result(document: Document, request: DocstringRequest, report: Any) -> DocstringResult:
    """The fills of the sites the request named (matched by name and line), each with the edit
    made where its docstring goes; any other site the server wrote for is left out."""
    edits = edits_from_json(document.text, field_of(report, "edits", list))
    sites = {(site.name, site.line): site for site in request.sites}
    fills = []
    for item in field_of(report, "docstrings", list):
        site = sites.get((item.get("name"), item.get("line")))
        if site is None:  # a definition on the same line as one asked for: not asked for itself
            continue
        mine = [e for e in edits if (e.start, e.end) == (site.start, site.end)]
        docstring = item.get("docstring")
        fills.append(
            DocstringFill(site, docstring, mine[0] if mine and docstring else None, item.get("reason"))
        )
    return DocstringResult(fills, stats_of(report))


def candidates_of(document: Document, report: Any) -> list[Candidate]:
    """The candidates, best first (the report carries no stats for them: empty ones)."""
    if not isinstance(report, list):
        raise ValueError("the candidates must be a list")
    stats = RequestStats(0, 0, 0, 0, 0.0, converged=True)
    candidates = []
    for item in report:
        edits = edits_from_json(document.text, field_of(item, "edits", list))
        score, broken = float(field_of(item, "score", (int, float))), bool(item.get("breaks_syntax"))
        edit = edits[0] if edits else None
        candidate = Candidate(field_of(item, "new_text", str), edit, score, [], stats, breaks_syntax=broken)
        candidates.append(candidate)
    return candidates


def review_result(document: Document, report: Any) -> ReviewResult:
    """The findings, with their offsets in the document found again from line and column."""
    text = document.text
    findings = []
    for item in field_of(report, "findings", list):
        line, column = field_of(item, "line", int), field_of(item, "column", int)
        found = field_of(item, "text", str)
        try:
            start = position_offset(text, line, column)
        except InputError as error:
            raise ValueError(str(error)) from None
        if text[start : start + len(found)] != found:
            raise ValueError(f"the finding at {line}:{column} is not in the document")
        expected, score = field_of(item, "expected", str), float(field_of(item, "score", (int, float)))
        findings.append(Finding(line, column, found, expected, score, start, start + len(found)))
    return ReviewResult(findings, stats_of(report))


def stats_of(report: Any) -> RequestStats:
    values = field_of(report, "stats", dict)
    try:
        return RequestStats(**known(RequestStats, values))
    except TypeError as error:
        raise ValueError(f"the stats are incomplete: {error}") from None


def span_of(document: Document, item: Any, asked: Sequence[Span] = ()) -> Span:
    """The span a report's entry is about: the one asked for at those offsets (with its label)."""
    start, end = field_of(item, "start", int), field_of(item, "end", int)
    if not 0 <= start <= end <= len(document.text):
        raise ValueError(f"a span {start}-{end} outside the document")
    same = [span for span in asked if (span.start, span.end) == (start, end)]
    return same[0] if same else Span(start, end, str(item.get("label", f"offsets {start}-{end}")))


def inside(span: Span, edits: list[TextEdit]) -> list[TextEdit]:
    return [e for e in edits if span.start <= e.start and e.end <= span.end]


def known(kind: type, values: dict) -> dict:
    """The entries of `values` that are fields of the dataclass `kind` (a newer server may say more)."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in values.items() if k in names}


def field_of(item: Any, key: str, kind: type | tuple) -> Any:
    if not isinstance(item, dict) or not isinstance(item.get(key), kind) or isinstance(item.get(key), bool):
        raise ValueError(f"the report has no {key!r} of the right type")
    return item[key]


def strings(values: list) -> list[str]:
    if not all(isinstance(v, str) for v in values):
        raise ValueError("texts must be strings")
    return values
