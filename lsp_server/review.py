"""Review diagnostics: the code tokens the model doubts, published as hints while the user is idle.

Review mode (:mod:`infill.modes.review`) scores each code token of a span with that token masked
and reports the runs of tokens below a threshold (findings). The server runs it in the background
(``review`` setting, off by default): once a document is quiet after an edit (the idle refresh's
timing, :mod:`lsp_server.idle`) on the lines around the edit, and on open on the whole file, in
windows of :data:`WINDOW_LINES` lines, nearest the last edit first. Each finding becomes one
diagnostic (severity Hint, source "infill", code "review") whose message names the model's
preferred text ("infill expected `<=`"); its ``data`` carries that text, and the quick fix
replaces exactly the diagnostic's range with it (another one runs fix mode on the line).

What is kept per document (:class:`DocumentReviews`): the findings of the text as it is, and the
parts of it still to be scored. An edit drops the findings on the lines it touches, shifts those
after it, and marks the edited lines and :data:`CONTEXT_LINES` lines either side to be scored
again. A window's findings replace the old ones in that window only if the document still has
the text that was scored: a stale result is never kept, nor published.

A review gives way: it stops before its next forward pass when the document changes or any
request comes in (:class:`Interruptible`), and a round stops at the first window boundary past
the pass budget (``passBudget``); what is left waits for the next quiet.

Nothing here knows about the server; the engine (and torch) is imported only when a window runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from infill.errors import Cancelled
from infill.text.edits import TextEdit
from infill.text.languages import PYTHON, Language
from infill.text.parse_cache import common_prefix
from lsp_server import actions
from lsp_server.diagnostics import SOURCE
from lsp_server.positions import UTF16, content_end, line_starts, offset_to_position

if TYPE_CHECKING:
    from infill.options import FixOptions

CODE = "review"
"""The diagnostics' code (syntax errors have theirs: infill.text.syntax)."""
SEVERITY = types.DiagnosticSeverity.Hint
WINDOW_LINES = 8
"""Lines scored in one go: the review checks whether to stop between windows (and passes)."""
CONTEXT_LINES = 2
"""After an edit, the lines this far above and below the edited ones are scored again too."""


@dataclass(frozen=True)
class Doubt:
    """One finding of review mode in the document's text: characters [start, end)."""

    start: int
    end: int
    text: str  # the doubted text as it is in the document
    expected: str  # the model's preferred text there ("": it would put nothing)
    score: float  # the lowest probability the model gave a token of it

    def shifted(self, delta: int) -> Doubt:
        return Doubt(self.start + delta, self.end + delta, self.text, self.expected, self.score)


# ---------------------------------------------------------------------- diagnostics


def message(doubt: Doubt) -> str:
    """What the diagnostic says: the model's preferred text, the text there, its probability."""
    expected, found = doubt.expected.strip(), doubt.text.strip()
    wanted = f"infill expected `{expected}`" if expected else "infill expected nothing here"
    return f"{wanted}, not `{found}` (probability {doubt.score:.2g})"


def fix_of(text: str, doubt: Doubt) -> tuple[int, int, str]:
    """The characters [start, end) the diagnostic covers and its quick fix replaces, and the
    text that goes there: the finding's range and the model's preferred text, less the leading
    blanks both start with (a token's space), less a "\r" the range would end inside a CRLF
    with (LSP has no position between the two); the new text has the document's line ends."""
    start, end, new_text = doubt.start, doubt.end, doubt.expected
    if "\n" in new_text and "\r\n" in text:
        new_text = new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    blanks = len(doubt.text) - len(doubt.text.lstrip(" \t"))
    while blanks and not (doubt.text[:blanks] == new_text[:blanks] and start + blanks < end):
        blanks -= 1
    start, new_text = start + blanks, new_text[blanks:]
    if 0 < end < len(text) and text[end - 1] == "\r" and text[end] == "\n" and end - 1 > start:
        end -= 1
    return start, end, new_text


def to_diagnostic(text: str, doubt: Doubt, encoding: str = UTF16, *, starts=None) -> types.Diagnostic:
    """One finding as an LSP diagnostic (source "infill", code "review", severity Hint), in the
    client's position ``encoding``; ``data`` holds the expected text and the text it replaces."""
    starts = starts if starts is not None else line_starts(text)
    start, end, new_text = fix_of(text, doubt)
    return types.Diagnostic(
        range=types.Range(
            start=offset_to_position(text, start, encoding, starts=starts),
            end=offset_to_position(text, end, encoding, starts=starts),
        ),
        message=message(doubt),
        severity=SEVERITY,
        code=CODE,
        source=SOURCE,
        data={"expected": new_text, "text": text[start:end], "score": round(doubt.score, 6)},
    )


def to_diagnostics(text: str, doubts: Sequence[Doubt], encoding: str = UTF16) -> list[types.Diagnostic]:
    starts = line_starts(text)
    return [to_diagnostic(text, doubt, encoding, starts=starts) for doubt in doubts]


def lowest(doubts: Sequence[Doubt], count: int) -> list[Doubt]:
    """The ``count`` least likely findings (``reviewMaxPerFile``), in document order."""
    kept = sorted(doubts, key=lambda d: (d.score, d.start))[: max(count, 0)]
    return sorted(kept, key=lambda d: d.start)


# ---------------------------------------------------------------------- quick fixes


def quick_fixes(
    uri: str,
    version: int | None,
    text: str,
    doubts: Sequence[Doubt],
    start: int,
    end: int,
    only: Sequence[str] | None = None,
    encoding: str = UTF16,
    document_changes: bool = True,
) -> list[types.CodeAction]:
    """For each finding that touches ``[start, end]``: a resolved quick fix that replaces the
    finding's range (the diagnostic's) with the model's preferred text, when it has one, and an
    unresolved one that runs fix mode on the finding's line."""
    if not actions.kind_allowed(actions.QUICK_FIX_KIND, only):
        return []
    starts = line_starts(text)
    found = []
    for doubt in doubts:
        if doubt.end < start or end < doubt.start:
            continue
        diagnostic = to_diagnostic(text, doubt, encoding, starts=starts)
        edit = replacement_edit(uri, version, text, doubt, encoding, document_changes)
        if edit is not None:
            data = actions.ActionData(uri, version, actions.FINDING, doubt.start, doubt.end, actions.REVIEW)
            expected, there = doubt.expected.strip(), doubt.text.strip()
            title = f"Infill: replace `{there}` with `{expected}`"
            action = types.CodeAction(title, kind=actions.QUICK_FIX_KIND, data=data.to_json(), edit=edit)
            action.diagnostics, action.is_preferred = [diagnostic], True
            found.append(action)
        line = bisect.bisect_right(starts, doubt.start) - 1
        line_start, line_end = starts[line], content_end(text, starts, line)
        data = actions.ActionData(uri, version, actions.LINES, line_start, line_end, actions.FIX)
        action = types.CodeAction(title=f"Infill: fix line {line + 1}", kind=actions.QUICK_FIX_KIND,
                                  data=data.to_json(), diagnostics=[diagnostic])  # fmt: skip
        found.append(action)
    return found


def replacement_edit(
    uri: str,
    version: int | None,
    text: str,
    doubt: Doubt,
    encoding: str = UTF16,
    document_changes: bool = True,
) -> types.WorkspaceEdit | None:
    """The edit of the finding's quick fix: its range (the diagnostic's) replaced with the
    model's preferred text; None when that would change nothing or delete the code."""
    start, end, new_text = fix_of(text, doubt)
    if not new_text.strip() or new_text == text[start:end]:
        return None
    summary = f"replace {text[start:end].strip()!r} with {new_text.strip()!r}"
    outcome = actions.Outcome([TextEdit(start, end, new_text)], summary)
    return actions.workspace_edit(uri, version, text, outcome, encoding, document_changes)


# ---------------------------------------------------------------------- what is kept per document


@dataclass
class DocumentReview:
    text: str
    doubts: list[Doubt] = field(default_factory=list)  # in document order
    pending: list[tuple[int, int]] = field(default_factory=list)  # to be scored, sorted, disjoint
    focus: int = 0  # where the last edit was: the windows nearest it go first


class DocumentReviews:
    """Per open document: its findings and what is still to be scored."""

    def __init__(self) -> None:
        self._documents: dict[str, DocumentReview] = {}

    def opened(self, uri: str, text: str) -> None:
        """A document opened (or opened again): the whole of it is to be scored."""
        self._documents[uri] = DocumentReview(text, [], [(0, len(text))] if text else [])

    def reset(self, uri: str) -> None:
        """Forget the findings of ``uri`` and score it all again (the settings changed)."""
        if uri in self._documents:
            self.opened(uri, self._documents[uri].text)

    def uris(self) -> list[str]:
        return list(self._documents)

    def closed(self, uri: str) -> None:
        self._documents.pop(uri, None)

    def changed(self, uri: str, text: str) -> None:
        """The document is now ``text``: the findings on the lines the change touched are
        dropped, those after it move with it; the touched lines and :data:`CONTEXT_LINES` lines
        around them are to be scored again."""
        state = self._documents.get(uri)
        if state is None:
            self.opened(uri, text)
            return
        old = state.text
        if old == text:
            return
        prefix = common_prefix(old, text)
        room = min(len(old), len(text)) - prefix
        suffix = min(common_prefix(old[::-1], text[::-1]), room)
        old_end, new_end, delta = len(old) - suffix, len(text) - suffix, len(text) - len(old)
        # the lines the change touched, in the old text: [touched_start, touched_end)
        touched_start, touched_end = line_bounds(old, prefix, old_end)
        kept = [d for d in state.doubts if d.end <= touched_start]
        kept += [d.shifted(delta) for d in state.doubts if d.start >= touched_end]
        pending = [around(text, prefix, new_end, CONTEXT_LINES)]
        for a, b in state.pending:  # what was still to be scored, where it is now
            if b <= touched_start:
                pending.append((a, b))
            elif a >= touched_end:
                pending.append((a + delta, b + delta))
            else:  # around the edit: from where it began to where it ended
                pending.append((min(a, touched_start), max(b, touched_end) + delta))
        state.text, state.doubts, state.focus = text, kept, prefix
        state.pending = merged(pending)

    def doubts(self, uri: str, text: str) -> list[Doubt]:
        """The findings of ``uri`` if its text is ``text`` (else none: they are of other text)."""
        state = self._documents.get(uri)
        return list(state.doubts) if state is not None and state.text == text else []

    def windows(self, uri: str, lines: int = WINDOW_LINES) -> list[tuple[int, int]]:
        """What is still to be scored, as windows of whole lines (at most ``lines`` each, with
        their line ends), nearest the last edit first."""
        state = self._documents.get(uri)
        if state is None:
            return []
        text, starts = state.text, line_starts(state.text)
        found = []
        for a, b in state.pending:
            first = bisect.bisect_right(starts, a) - 1
            last = bisect.bisect_right(starts, max(a, b - 1)) - 1
            for line in range(first, last + 1, lines):
                after = line + lines
                found.append((starts[line], starts[after] if after <= last else line_end(text, starts, last)))
        return sorted(found, key=lambda w: (distance(w, state.focus), w[0]))

    def scored(self, uri: str, text: str, window: tuple[int, int], doubts: Sequence[Doubt]) -> bool:
        """The findings of ``window`` of ``text``; kept (replacing that window's) only if the
        document is still ``text``. Whether they were."""
        state = self._documents.get(uri)
        if state is None or state.text != text:
            return False
        a, b = window
        others = [d for d in state.doubts if not a <= d.start < b]
        state.doubts = sorted([*others, *doubts], key=lambda d: (d.start, d.end))
        state.pending = subtracted(state.pending, window)
        return True

    def pending(self, uri: str) -> list[tuple[int, int]]:
        state = self._documents.get(uri)
        return list(state.pending) if state is not None else []


def line_end(text: str, starts: Sequence[int], line: int) -> int:
    """Offset past ``line`` and its line break."""
    return starts[line + 1] if line + 1 < len(starts) else len(text)


def line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """From the start of the line of ``start`` to past the line break of the line of ``end``."""
    starts = line_starts(text)
    first = bisect.bisect_right(starts, start) - 1
    last = bisect.bisect_right(starts, end) - 1
    return starts[first], line_end(text, starts, last)


def around(text: str, start: int, end: int, context: int) -> tuple[int, int]:
    """The lines of ``[start, end]`` of ``text`` and ``context`` lines either side."""
    starts = line_starts(text)
    first = max(bisect.bisect_right(starts, start) - 1 - context, 0)
    last = min(bisect.bisect_right(starts, end) - 1 + context, len(starts) - 1)
    return starts[first], line_end(text, starts, last)


def merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, overlapping and touching ranges joined, empty ones left out."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[0] < r[1]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def subtracted(ranges: Sequence[tuple[int, int]], cut: tuple[int, int]) -> list[tuple[int, int]]:
    out = []
    for a, b in ranges:
        out += [(a, min(b, cut[0])), (max(a, cut[1]), b)]
    return merged(out)


def distance(window: tuple[int, int], offset: int) -> int:
    a, b = window
    return 0 if a <= offset < b else min(abs(a - offset), abs(b - 1 - offset))


# ---------------------------------------------------------------------- running


class Interruptible:
    """A denoiser that stops (:class:`infill.errors.Cancelled`) before any forward pass once
    ``stop()`` is true; everything else is the inner denoiser's. Review mode scores a window in
    several passes, none of which the caller sees: this lets a request in the way wait for one
    pass at most."""

    def __init__(self, inner: Any, stop: Callable[[], bool]) -> None:
        self.inner = inner
        self.stop = stop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name in ("logits", "cached_logits"):

            def checked(*args: Any, **kwargs: Any) -> Any:
                if self.stop():
                    raise Cancelled("review stopped: the document changed or a request came in")
                return value(*args, **kwargs)

            return checked
        return value


def review_window(
    denoiser: Any,
    text: str,
    start: int,
    end: int,
    options: FixOptions,
    stop: Callable[[], bool] = lambda: False,
    language: Language = PYTHON,
) -> tuple[list[Doubt], int]:
    """Review mode on the characters [start, end) of ``text`` (whole lines): its findings and
    the forward passes it took. Cancelled once ``stop()`` is true (checked before each pass);
    InputError for text no file could hold."""
    from infill.engine.pipeline import Hooks, run
    from infill.modes.review import ReviewRequest
    from infill.text.spans import Span

    if not text[start:end].strip():
        return [], 0
    document = actions.text_document(text, language)
    request = ReviewRequest(document, [Span(start, end, "review window")], options)
    result = run(Interruptible(denoiser, stop), request, Hooks(cancelled=stop))
    doubts = [Doubt(f.start, f.end, f.text, f.expected, f.score) for f in result.findings]
    return doubts, result.stats.forward_passes
