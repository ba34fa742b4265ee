"""Code actions as plain functions: which fills to offer for a range, and running one.

Listing (:func:`code_actions`) is instant: it only parses the document with tree-sitter to find
the node at the cursor, and returns *unresolved* actions whose ``data`` says what to fill
(``{uri, version, kind, start, end}``, offsets in characters of the document text at that
version). :func:`resolve` runs the model on that data and returns a ``WorkspaceEdit``.

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
from lsp_server.positions import UTF16, to_lsp_edits

if TYPE_CHECKING:
    from infill.backend import Denoiser
    from infill.engine import InfillOptions

BASE_KIND = "refactor.rewrite.infill"
SELECTION_KIND = f"{BASE_KIND}.selection"
NODE_KIND = f"{BASE_KIND}.node"
CODE_ACTION_KINDS = [SELECTION_KIND, NODE_KIND]

SELECTION = "selection"
NODE_KINDS = ("statement", "body", "expression")
"""Node kinds that "fill node at cursor" considers; the smallest one around the cursor wins."""


@dataclass(frozen=True)
class ActionData:
    """What an unresolved action will fill: characters [start, end) of ``uri`` at ``version``."""

    uri: str
    version: int | None
    kind: str  # SELECTION or one of NODE_KINDS
    start: int
    end: int

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
        if kind != SELECTION and kind not in NODE_KINDS:
            raise InputError(f"unknown fill kind {kind!r}")
        if not (_is_int(start) and _is_int(end) and 0 <= start <= end):
            raise InputError(f"the code action's offsets are invalid: start={start!r}, end={end!r}")
        return cls(uri, version, kind, start, end)


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
        data = ActionData(uri, version, SELECTION, start, end)
        actions.append(_action("Infill: fill selection", SELECTION_KIND, data))
    if kind_allowed(NODE_KIND, only):
        found = node_at_cursor(text, start, end)
        if found is not None and (found[0].start, found[0].end) != (start, end):
            span, kind = found
            data = ActionData(uri, version, kind, span.start, span.end)
            actions.append(_action(f"Infill: fill {span.label}", NODE_KIND, data))
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

    if data.end > len(text):
        raise InputError(
            f"the code action covers characters {data.start}-{data.end}, "
            f"but the document has only {len(text)}"
        )
    document = document_from_bytes(text.encode("utf-8", "surrogatepass"))
    span = Span(data.start, data.end, data.kind)
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
