"""Each mode's result as JSON: what `infill --json` prints and what a team server's /v1/infill
answers (team_server), so that both say the same thing in the same words.

    fill          json_report        edits, each span's new text, the request's stats
    fix           fix_report         edits, each span's new text, the flagged tokens, stats
    docstrings    docstring_report   edits, each docstring written and why, stats
    alternatives  candidates_report  one entry per candidate, best first: its score and edit
    review        review_report      the findings: line, column, text, expected, score; stats

Edits carry offsets and 0-based line/character ranges (infill.text.edits.edits_to_json).
"""

from __future__ import annotations

from infill.modes.alternatives import Candidate
from infill.modes.docstrings import DocstringResult
from infill.modes.fill import InfillResult
from infill.modes.fix import FixResult
from infill.modes.review import ReviewResult
from infill.text.document import Document
from infill.text.edits import edits_to_json


def json_report(document: Document, result: InfillResult) -> dict:
    stats = result.stats
    return {
        "edits": edits_to_json(document.text, result.edits),
        "spans": [{"label": s.span.label, "start": s.span.start, "end": s.span.end,
                   "new_text": s.new_text, "changed": s.edit is not None,
                   **(authors_tokens(s.tokens) if s.tokens is not None else {})} for s in result.spans],
        "stats": stats.__dict__,
    }


def authors_tokens(by_step: list[list[int]]) -> dict:
    """--protocol authors: every id the loop committed, in order, and which step committed each."""
    return {"tokens": [t for step in by_step for t in step], "tokens_by_step": by_step}


def fix_report(document: Document, result: FixResult) -> dict:
    return {
        "edits": edits_to_json(document.text, result.edits),
        "spans": [{"label": s.span.label, "start": s.span.start, "end": s.span.end,
                   "new_text": s.new_text, "changed": bool(s.edits)} for s in result.spans],
        "flagged": [token.__dict__ for token in result.flagged],
        "stats": result.stats.__dict__,
    }


def docstring_report(document: Document, result: DocstringResult) -> dict:
    return {
        "edits": edits_to_json(document.text, result.edits),
        "docstrings": [{"name": f.site.name, "line": f.site.line, "docstring": f.docstring,
                        "reason": f.reason} for f in result.fills],
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
