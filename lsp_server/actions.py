"""Code actions as plain functions: which fills to offer for a range, and running one.

Listing (:func:`code_actions`, :func:`quick_fixes`) is instant: it only parses the document
with tree-sitter to find the node at the cursor or the syntax errors in the range, and returns
*unresolved* actions whose ``data`` says what to do (:class:`ActionData`: ``{uri, version, mode,
kind, start, end}``, offsets in characters of the document text at that version).
:func:`resolve` runs the model on that data and returns a ``WorkspaceEdit``.

Nothing here knows about the server, the transport or threads; ``infill.engine`` (and so torch)
is imported only when a fill actually runs, so that listing never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from infill.document import document_from_bytes
from infill.errors import InputError
from infill.spans import Span, node_at_offset, validate_spans
from lsp_server import diagnostics
from lsp_server.positions import UTF16, to_lsp_edits

if TYPE_CHECKING:
    from infill.backend import Denoiser
    from infill.engine import InfillOptions

BASE_KIND = "refactor.rewrite.infill"
SELECTION_KIND = f"{BASE_KIND}.selection"
NODE_KIND = f"{BASE_KIND}.node"
QUICK_FIX_KIND = types.CodeActionKind.QuickFix.value  # "quickfix"
CODE_ACTION_KINDS = [QUICK_FIX_KIND, SELECTION_KIND, NODE_KIND]

SELECTION = "selection"
NODE_KINDS = ("statement", "body", "expression")
"""Node kinds that "fill node at cursor" considers; the smallest one around the cursor wins."""
LINES = "lines"
SPAN_KINDS = (SELECTION, *NODE_KINDS, LINES)
"""What an action's span is (it names the span in messages): a selection, a node, whole lines."""

FILL, NODE, FIX, DOCUMENT, ALTERNATIVE = "fill", "node", "fix", "document", "alternative"
MODES = (FILL, NODE, FIX, DOCUMENT, ALTERNATIVE)
"""What resolving an action does. "fill" (a selection) and "node" (the node at the cursor)
regenerate the span; "fix" (a quick fix for a syntax error) regenerates the statement or lines
around the error, as a plain fill until the engine has a repair mode; "document" and
"alternative" are reserved for later actions (resolving them is an error for now)."""
RESOLVABLE_MODES = (FILL, NODE, FIX)


@dataclass(frozen=True)
class ActionData:
    """What an unresolved action will do (``mode``) to characters [start, end) of ``uri`` at
    ``version``."""

    uri: str
    version: int | None
    kind: str  # one of SPAN_KINDS
    start: int
    end: int
    mode: str = FILL  # one of MODES

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ActionData:
        """Parse an action's ``data`` as the client sends it back; InputError if it is not ours."""
        if not isinstance(data, Mapping):
            raise InputError("the code action has no infill data (was it listed by this server?)")
        try:
            uri, version, kind, start, end = (data[key] for key in ("uri", "version", "kind", "start", "end"))
        except KeyError as missing:
            raise InputError(f"the code action's data lacks {missing}") from None
        if not isinstance(uri, str):
            raise InputError(f"the code action's uri must be a string, got {uri!r}")
        if version is not None and not _is_int(version):
            raise InputError(f"the code action's version must be an integer, got {version!r}")
        if kind not in SPAN_KINDS:
            raise InputError(f"unknown fill kind {kind!r}")
        if not (_is_int(start) and _is_int(end) and 0 <= start <= end):
            raise InputError(f"the code action's offsets are invalid: start={start!r}, end={end!r}")
        mode = data.get("mode", FILL if kind == SELECTION else NODE)
        if mode not in MODES:
            raise InputError(f"unknown action mode {mode!r}; expected one of {', '.join(MODES)}")
        return cls(uri, version, kind, start, end, mode)


def code_actions(
    uri: str,
    version: int | None,
    text: str,
    start: int,
    end: int,
    only: Sequence[str] | None = None,
) -> list[types.CodeAction]:
    """Unresolved fill actions for the characters [start, end) of ``text`` (no model run).

    - "Fill selection" when the range is not empty;
    - "Fill <node>" for the smallest statement, function/class body or expression around the
      cursor (for a selection: around its start, and containing all of it), unless that is the
      selection itself.

    ``only`` is the client's ``context.only`` filter (hierarchical code action kinds).
    """
    actions = []
    if start < end and kind_allowed(SELECTION_KIND, only) and _fillable(text, start, end):
        data = ActionData(uri, version, SELECTION, start, end, FILL)
        actions.append(_action("Infill: fill selection", SELECTION_KIND, data))
    if kind_allowed(NODE_KIND, only):
        found = node_at_cursor(text, start, end)
        if found is not None and (found[0].start, found[0].end) != (start, end):
            span, kind = found
            data = ActionData(uri, version, kind, span.start, span.end, NODE)
            actions.append(_action(f"Infill: fill {span.label}", NODE_KIND, data))
    return actions


def quick_fixes(
    uri: str,
    version: int | None,
    text: str,
    start: int,
    end: int,
    only: Sequence[str] | None = None,
    encoding: str = UTF16,
) -> list[types.CodeAction]:
    """A quick fix (kind "quickfix", mode "fix") per syntax error touching ``[start, end]``.

    The errors are found again here (the same function that publishes them, so the attached
    diagnostics equal the published ones); errors whose fixes regenerate the same span share one
    action. Unresolved: the span is filled when the client resolves it.
    """
    if not kind_allowed(QUICK_FIX_KIND, only):
        return []
    fixes: dict[tuple[int, int], tuple[Span, str, list[diagnostics.SyntaxProblem]]] = {}
    for problem in diagnostics.syntax_problems(text):
        if diagnostics.overlaps(problem, start, end):
            span, kind = diagnostics.fix_span(text, problem)
            fixes.setdefault((span.start, span.end), (span, kind, []))[2].append(problem)
    actions = []
    for span, kind, problems in fixes.values():
        data = ActionData(uri, version, kind, span.start, span.end, FIX)
        action = _action(f"Infill: fix syntax error (fill {span.label})", QUICK_FIX_KIND, data)
        action.diagnostics = diagnostics.to_diagnostics(text, problems, encoding)
        action.is_preferred = True
        actions.append(action)
    return actions


def node_at_cursor(text: str, start: int, end: int | None = None) -> tuple[Span, str] | None:
    """The smallest node of :data:`NODE_KINDS` around ``start`` that contains ``[start, end)``.

    Returns the node's span (labelled, e.g. "statement on line 3") and its kind; None if the
    cursor is in no such node or the text does not parse into one. Of equal spans the kind that
    comes first in :data:`NODE_KINDS` wins.
    """
    end = start if end is None else end
    found = []
    for kind in NODE_KINDS:
        span = node_at_offset(text, start, kind)
        if span is not None and span.start <= start and end <= span.end and span.start < span.end:
            found.append((span.end - span.start, NODE_KINDS.index(kind), span, kind))
    if not found:
        return None
    _, _, span, kind = min(found, key=lambda item: item[:2])
    return span, kind


def kind_allowed(kind: str, only: Sequence[str] | None) -> bool:
    """Whether ``kind`` passes a ``context.only`` filter (``refactor`` admits ``refactor.x.y``)."""
    if not only:
        return True
    return any(kind == wanted or kind.startswith(f"{wanted}.") or wanted == "" for wanted in only)


def resolve(
    denoiser: Denoiser,
    text: str,
    data: ActionData,
    options: InfillOptions | None = None,
    encoding: str = UTF16,
    document_changes: bool = True,
    on_step: Callable[[Any, Any], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> types.WorkspaceEdit:
    """Run the fill ``data`` describes on ``text`` (the document at ``data.version``).

    The edit is a ``TextDocumentEdit`` for ``data.uri`` at ``data.version`` (an
    ``OptionalVersionedTextDocumentIdentifier``), so a client refuses it if the document has
    changed since; with ``document_changes=False`` (a client without ``documentChanges``
    support) it goes in ``changes`` instead, without a version. No change: no text edits.
    InputError for a bad span, ``infill.errors.Cancelled`` if ``cancelled()`` turns true.
    """
    from infill.engine import infill  # torch: only when a fill runs

    if data.mode not in RESOLVABLE_MODES:
        raise InputError(f"{data.mode!r} actions are not supported by this server yet")
    if data.end > len(text):
        raise InputError(
            f"the code action covers characters {data.start}-{data.end}, "
            f"but the document has only {len(text)}"
        )
    document = document_from_bytes(text.encode("utf-8", "surrogatepass"))
    span = Span(data.start, data.end, data.kind)
    # FIX: a plain fill of the statement or lines around the error, until the engine can repair.
    result = infill(denoiser, document, [span], options, on_step=on_step, cancelled=cancelled)
    edits = to_lsp_edits(text, result.edits, encoding)
    if not document_changes:
        return types.WorkspaceEdit(changes={data.uri: edits})
    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=data.uri, version=data.version)
    return types.WorkspaceEdit(
        document_changes=[types.TextDocumentEdit(text_document=identifier, edits=edits)]
    )


def _action(title: str, kind: str, data: ActionData) -> types.CodeAction:
    return types.CodeAction(title=title, kind=kind, data=data.to_json())


def _fillable(text: str, start: int, end: int) -> bool:
    try:
        validate_spans(text, [Span(start, end)])
    except InputError:
        return False
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
