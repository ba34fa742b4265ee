"""Code actions as plain functions: which actions to offer for a range, and running one.

Listing (:func:`list_actions`: :func:`quick_fixes` and :func:`code_actions`) is instant: it only
parses the document with tree-sitter to find the node at the cursor, the syntax errors in the
range and the definitions without a docstring, and returns *unresolved* actions whose ``data``
says what to do (:class:`ActionData`: ``{uri, version, mode, kind, start, end}``, offsets in
characters of the document text at that version). :func:`run_action` runs the model on that data
and returns our edits; :func:`workspace_edit` makes them a ``WorkspaceEdit``.

What resolving does, by ``mode``:

- "fill" (a selection) and "node" (the node at the cursor) regenerate the span
  (:class:`infill.modes.FillRequest`);
- "fix" re-predicts only the tokens of the span the model finds unlikely and keeps every other
  byte (:class:`infill.modes.FixRequest`): "Infill: fix selection" / "fix statement on line N";
- "document" writes docstrings (:class:`infill.modes.DocstringRequest`): for the definition
  whose docstring site is ``[start, end)`` (kind "definition"), or for every definition of the
  file that lacks one (kind "file");
- "alternative": several fills of a selection sampled as one batch, offered as separate actions
  ranked by the model's score (:mod:`lsp_server.alternatives`; the server runs it);
- "review": the quick fix of a review finding (kind "finding"), listed with its edit (the
  model's preferred text over the finding's range; :mod:`lsp_server.review`).

Quick fixes for syntax errors: a repair can replace or delete tokens but never insert one, so
a quick fix uses mode "fix" when every error it covers is an ERROR node with text in it (tokens
tree-sitter had to skip: the span still has the tokens to correct), and mode "fill" (regenerate
the statement or lines around the error) when one of them is a MISSING token (something must be
inserted) or an ERROR node without text. The title says which: "(repair statement on line 5)"
or "(fill statement on line 5)".

Edits: each mode's edits are minimal (the engine's), in a ``TextDocumentEdit`` carrying the
document version. When the client supports change annotations, they are ``AnnotatedTextEdit``
s with one ``ChangeAnnotation`` (label "infill", ``needsConfirmation``, a description with the
steps and scores) so that the client can show a preview first.

Nothing here knows about the server, the transport or threads; the engine (and so torch) is
imported only when a fill actually runs, so that listing never pays for it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from infill.errors import InputError
from infill.text.docstring_sites import missing_docstring_at, missing_docstrings
from infill.text.document import Document, document_from_bytes
from infill.text.edits import TextEdit
from infill.text.languages import PYTHON, Language
from infill.text.spans import Span, node_at_offset, validate_spans
from infill.text.syntax import SYNTAX_ERROR, SyntaxProblem, overlaps, syntax_problems
from lsp_server import diagnostics
from lsp_server.positions import UTF16, to_lsp_edits

if TYPE_CHECKING:
    from infill.engine.pipeline import Hooks
    from infill.models.base import Denoiser
    from infill.options import InfillOptions

BASE_KIND = "refactor.rewrite.infill"
SELECTION_KIND = f"{BASE_KIND}.selection"
NODE_KIND = f"{BASE_KIND}.node"
FIX_KIND = f"{BASE_KIND}.fix"
ALTERNATIVES_KIND = f"{BASE_KIND}.alternatives"
DOCSTRING_KIND = f"{BASE_KIND}.docstring"
FILE_DOCSTRINGS_KIND = "source.infill.docstrings"  # a whole-file action: "Source Action..."
QUICK_FIX_KIND = types.CodeActionKind.QuickFix.value  # "quickfix"
CODE_ACTION_KINDS = [
    QUICK_FIX_KIND,
    SELECTION_KIND,
    NODE_KIND,
    FIX_KIND,
    ALTERNATIVES_KIND,
    DOCSTRING_KIND,
    FILE_DOCSTRINGS_KIND,
]

SELECTION = "selection"
NODE_KINDS = ("statement", "body", "expression")
"""Node kinds that "fill node at cursor" considers; the smallest one around the cursor wins."""
LINES = "lines"
DEFINITION, FILE = "definition", "file"
FINDING = "finding"
SPAN_KINDS = (SELECTION, *NODE_KINDS, LINES, DEFINITION, FILE, FINDING)
"""What an action's span is (it names the span in messages): a selection, a node, whole lines,
a definition's docstring site, the whole file, a review finding."""

FILL, NODE, FIX, DOCUMENT, ALTERNATIVE = "fill", "node", "fix", "document", "alternative"
REVIEW = "review"
MODES = (FILL, NODE, FIX, DOCUMENT, ALTERNATIVE, REVIEW)
"""What resolving an action does (see the module docstring)."""
RESOLVABLE_MODES = (FILL, NODE, FIX, DOCUMENT)
"""The modes :func:`run_action` runs; "alternative" is :mod:`lsp_server.alternatives`', "review"
:mod:`lsp_server.review`'s."""

ANNOTATION_ID = "infill"


@dataclass(frozen=True)
class ActionData:
    """What an unresolved action will do (``mode``) to characters [start, end) of ``uri`` at
    ``version``. ``candidate``: for an "alternative" action, which of the cached candidates
    (0 = the best); None for the action that samples them. ``digest``: of the text it was
    listed for (:func:`lsp_server.integrity.text_digest`), so that a version number reused for
    other text is caught; None: not checked."""

    uri: str
    version: int | None
    kind: str  # one of SPAN_KINDS
    start: int
    end: int
    mode: str = FILL  # one of MODES
    candidate: int | None = None
    digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for optional in ("candidate", "digest"):
            if data[optional] is None:
                del data[optional]
        return data

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
        candidate = data.get("candidate")
        if candidate is not None and not (_is_int(candidate) and candidate >= 0 and mode == ALTERNATIVE):
            raise InputError(f"the code action's candidate is invalid: {candidate!r}")
        digest = data.get("digest")
        if digest is not None and not isinstance(digest, str):
            raise InputError(f"the code action's digest must be a string, got {digest!r}")
        return cls(uri, version, kind, start, end, mode, candidate, digest)


@dataclass
class Outcome:
    """What running an action produced: edits of the text at the action's version."""

    edits: list[TextEdit]  # minimal, character offsets
    summary: str  # what was done: steps, tokens, scores (the change annotation's description)
    nothing: str | None = None  # why there is no edit, when there is none


# ---------------------------------------------------------------------- listing


def list_actions(
    uri: str,
    version: int | None,
    text: str,
    start: int,
    end: int,
    only: Sequence[str] | None = None,
    encoding: str = UTF16,
    alternatives: int = 1,
    ready: Sequence[types.CodeAction] = (),
    language: Language = PYTHON,
) -> list[types.CodeAction]:
    """Quick fixes first, then ``ready`` (resolved actions, such as the alternatives sampled for
    this range), then the other actions (:func:`code_actions`, offering ``alternatives``
    candidates); an action that would do what an earlier one does (same mode, span and
    candidate) is left out, and so is one of a kind that ``only`` filters out."""
    found = quick_fixes(uri, version, text, start, end, only, encoding, language)
    found += [action for action in ready if kind_allowed(action.kind or "", only)]
    found += code_actions(uri, version, text, start, end, only, alternatives, language)
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for action in found:
        data = action.data
        key = (data["mode"], data["start"], data["end"], data.get("candidate"))
        if key not in seen:
            seen.add(key)
            unique.append(action)
    return unique


def code_actions(
    uri: str,
    version: int | None,
    text: str,
    start: int,
    end: int,
    only: Sequence[str] | None = None,
    alternatives: int = 1,
    language: Language = PYTHON,
) -> list[types.CodeAction]:
    """Unresolved actions for the characters [start, end) of ``text`` (no model run), in order:

    - "fill selection" when the range is not empty;
    - "fill <node>" for the smallest statement, function/class body or expression around the
      cursor (for a selection: around its start, and containing all of it), unless that is the
      selection itself;
    - "fix selection", or "fix <statement>" for the smallest statement around the cursor;
    - "fill selection (N alternatives)" for a selection, when ``alternatives`` is at least 2;
    - "add docstring to <definition>" when the innermost definition around the start lacks one;
    - "add missing docstrings in file (N)" when some definition lacks one;

    ("doc comment" for "docstring" in languages other than Python: Language.doc_noun).

    Nodes, fixes of statements and documentation are those of ``language`` (none in plain text).

    ``only`` is the client's ``context.only`` filter (hierarchical code action kinds).
    """
    actions = []
    selection = start < end and _fillable(text, start, end)
    if selection and kind_allowed(SELECTION_KIND, only):
        data = ActionData(uri, version, SELECTION, start, end, FILL)
        actions.append(_action("Infill: fill selection", SELECTION_KIND, data))
    if kind_allowed(NODE_KIND, only):
        found = node_at_cursor(text, start, end, language)
        if found is not None and (found[0].start, found[0].end) != (start, end):
            span, kind = found
            data = ActionData(uri, version, kind, span.start, span.end, NODE)
            actions.append(_action(f"Infill: fill {span.label}", NODE_KIND, data))
    if kind_allowed(FIX_KIND, only):
        if selection:
            data = ActionData(uri, version, SELECTION, start, end, FIX)
            actions.append(_action("Infill: fix selection", FIX_KIND, data))
        elif start == end:
            statement = node_at_offset(text, start, "statement", language)
            if statement is not None and statement.start < statement.end:
                data = ActionData(uri, version, "statement", statement.start, statement.end, FIX)
                actions.append(_action(f"Infill: fix {statement.label}", FIX_KIND, data))
    if selection and alternatives >= 2 and kind_allowed(ALTERNATIVES_KIND, only):
        data = ActionData(uri, version, SELECTION, start, end, ALTERNATIVE)
        title = f"Infill: fill selection ({alternatives} alternatives)"
        actions.append(_action(title, ALTERNATIVES_KIND, data))
    if kind_allowed(DOCSTRING_KIND, only):
        site = missing_docstring_at(text, start, language)
        if site is not None:
            data = ActionData(uri, version, DEFINITION, site.start, site.end, DOCUMENT)
            title = f"Infill: add {language.doc_noun} to {site.name}"
            actions.append(_action(title, DOCSTRING_KIND, data))
    if kind_allowed(FILE_DOCSTRINGS_KIND, only):
        sites = missing_docstrings(text, language=language)
        if sites:
            data = ActionData(uri, version, FILE, 0, len(text), DOCUMENT)
            title = f"Infill: add missing {language.doc_noun}s in file ({len(sites)})"
            actions.append(_action(title, FILE_DOCSTRINGS_KIND, data))
    return actions


def quick_fixes(
    uri: str,
    version: int | None,
    text: str,
    start: int,
    end: int,
    only: Sequence[str] | None = None,
    encoding: str = UTF16,
    language: Language = PYTHON,
) -> list[types.CodeAction]:
    """A quick fix (kind "quickfix") per syntax error touching ``[start, end]``.

    The errors are found again here (the same function that publishes them, so the attached
    diagnostics equal the published ones); errors whose fixes regenerate the same span share one
    action. Its mode is "fix" (repair) if every error it covers still has tokens, else "fill"
    (see the module docstring). Unresolved: the model runs when the client resolves it.
    """
    if not kind_allowed(QUICK_FIX_KIND, only):
        return []
    fixes: dict[tuple[int, int], tuple[Span, str, list[SyntaxProblem]]] = {}
    for problem in syntax_problems(text, language):
        if overlaps(problem, start, end):
            span, kind = diagnostics.fix_span(text, problem, language)
            fixes.setdefault((span.start, span.end), (span, kind, []))[2].append(problem)
    actions = []
    for span, kind, problems in fixes.values():
        mode = FIX if all(has_tokens(text, problem) for problem in problems) else FILL
        data = ActionData(uri, version, kind, span.start, span.end, mode)
        verb = "repair" if mode == FIX else "fill"
        action = _action(f"Infill: fix syntax error ({verb} {span.label})", QUICK_FIX_KIND, data)
        action.diagnostics = diagnostics.to_diagnostics(text, problems, encoding)
        action.is_preferred = True
        actions.append(action)
    return actions


def has_tokens(text: str, problem: SyntaxProblem) -> bool:
    """Whether a repair can fix ``problem``: an ERROR node with text (tokens to replace or
    delete); not a MISSING token, which needs an insertion."""
    return problem.code == SYNTAX_ERROR and bool(text[problem.start : problem.end].strip())


def node_at_cursor(
    text: str, start: int, end: int | None = None, language: Language = PYTHON
) -> tuple[Span, str] | None:
    """The smallest node of :data:`NODE_KINDS` around ``start`` that contains ``[start, end)``.

    Returns the node's span (labelled, e.g. "statement on line 3") and its kind; None if the
    cursor is in no such node or the text does not parse into one. Of equal spans the kind that
    comes first in :data:`NODE_KINDS` wins.
    """
    end = start if end is None else end
    found = []
    for kind in NODE_KINDS:
        span = node_at_offset(text, start, kind, language)
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


# ---------------------------------------------------------------------- resolving


def run_action(
    denoiser: Denoiser,
    text: str,
    data: ActionData,
    options: InfillOptions | None = None,
    hooks: Hooks | None = None,
    language: Language = PYTHON,
) -> Outcome:
    """Run the action ``data`` describes on ``text`` (the document at ``data.version``).

    InputError for a bad span or a mode this function does not run; ``infill.errors.Cancelled``
    if ``hooks.cancelled()`` turns true; ``hooks.on_progress(done, total)`` before each group of
    docstrings (before the one job of the other modes). The whole text goes to the engine, which
    stages each job on the part of it the model can reach (infill.engine.pipeline.in_window).
    """
    from infill.engine.pipeline import Hooks, run
    from infill.modes.fill import FillRequest  # torch: only when a fill runs
    from infill.options import InfillOptions

    if data.mode not in RESOLVABLE_MODES:
        raise InputError(f"{data.mode!r} actions are not resolved here")
    check_span(text, data)
    options = options or InfillOptions()
    hooks = hooks or Hooks()
    document = text_document(text, language)
    if data.mode == DOCUMENT:
        return _document(denoiser, document, data, options, hooks)
    span = Span(data.start, data.end, describe(text, data))
    if data.mode == FIX:
        return _fix(denoiser, document, span, options, hooks)
    result = run(denoiser, FillRequest(document, [span], options), hooks)
    summary = f"fill {span.label}: {_steps(result.stats)}"
    return Outcome(result.edits, summary, None if result.edits else "the model wrote the same text")


def _fix(denoiser, document, span, options, hooks) -> Outcome:
    from infill.engine.pipeline import run
    from infill.modes.fix import FixRequest
    from infill.options import FixOptions

    result = run(denoiser, FixRequest(document, [span], FixOptions.from_infill(options)), hooks)
    flagged = result.flagged
    summary = f"fix {span.label}: {len(flagged)} unlikely token(s) re-predicted, {_steps(result.stats)}"
    if result.edits:
        return Outcome(result.edits, summary)
    nothing = "the model found no unlikely token" if not flagged else "the model kept every unlikely token"
    return Outcome([], summary, nothing)


def _document(denoiser, document, data, options, hooks) -> Outcome:
    from infill.engine.pipeline import run
    from infill.modes.docstrings import DocstringRequest

    noun = document.language.doc_noun
    if data.kind == FILE:
        # The sites inside the action's span (all of them: a listed file action spans the whole
        # text); data from a client that changed the span must not get edits outside it.
        found = missing_docstrings(document.text, language=document.language)
        sites = [s for s in found if data.start <= s.start and s.end <= data.end]
        if not sites:
            return Outcome([], f"no {noun} to add", f"every function and class has a {noun}")
    else:
        found = missing_docstrings(document.text, language=document.language)
        sites = [s for s in found if (s.start, s.end) == (data.start, data.end)]
        if not sites:
            raise InputError(f"no definition without a {noun} at characters {data.start}-{data.end}")
    result = run(denoiser, DocstringRequest(document, sites, options), hooks)
    written = [fill for fill in result.fills if fill.edit is not None]
    names = ", ".join(fill.site.name for fill in written) or "none"
    summary = f"{len(written)} of {len(sites)} {noun}(s) written ({names}), {_steps(result.stats)}"
    reasons = sorted({fill.reason for fill in result.fills if fill.reason})
    return Outcome(result.edits, summary, None if written else "; ".join(reasons) or f"no {noun} written")


def workspace_edit(
    uri: str,
    version: int | None,
    text: str,
    outcome: Outcome,
    encoding: str = UTF16,
    document_changes: bool = True,
    annotate: bool = False,
) -> types.WorkspaceEdit:
    """The outcome's edits of ``text`` (``uri`` at ``version``) as a ``WorkspaceEdit``.

    A ``TextDocumentEdit`` for ``uri`` at ``version`` (an ``OptionalVersionedTextDocumentIdentifier``),
    so a client refuses it if the document has changed since; with ``document_changes=False`` (a
    client without ``documentChanges`` support) the edits go in ``changes`` instead, without a
    version. With ``annotate`` (and ``documentChanges``), the edits are ``AnnotatedTextEdit`` s of
    one ``ChangeAnnotation`` that needs confirmation, described by ``outcome.summary``. No change:
    no text edits.
    """
    edits: list[Any] = to_lsp_edits(text, outcome.edits, encoding)
    if not document_changes:
        return types.WorkspaceEdit(changes={uri: edits})
    annotations = None
    if annotate:
        edits = [
            types.AnnotatedTextEdit(range=edit.range, new_text=edit.new_text, annotation_id=ANNOTATION_ID)
            for edit in edits
        ]
        annotation = types.ChangeAnnotation(
            label="infill", needs_confirmation=True, description=outcome.summary
        )
        annotations = {ANNOTATION_ID: annotation}
    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    return types.WorkspaceEdit(
        document_changes=[types.TextDocumentEdit(text_document=identifier, edits=edits)],
        change_annotations=annotations,
    )


def check_span(text: str, data: ActionData) -> None:
    if data.end > len(text):
        raise InputError(
            f"the code action covers characters {data.start}-{data.end}, "
            f"but the document has only {len(text)}"
        )


def text_document(text: str, language: Language = PYTHON) -> Document:
    """The engine's document for an editor's text in ``language`` (offsets are the text's own, a
    BOM included).
    InputError for a text with a lone surrogate (ill-formed UTF-16 from the client): it has no
    UTF-8 form, so no file could hold it."""
    lone = _LONE_SURROGATE.search(text)
    if lone is not None:
        line = text.count("\n", 0, lone.start()) + 1
        raise InputError(
            f"the document has a lone surrogate U+{ord(lone.group()):04X} on line {line} "
            "(ill-formed UTF-16 from the editor), which no UTF-8 file can hold: fix that character first"
        )
    document = document_from_bytes(text.encode("utf-8", "surrogatepass"))
    return dataclasses.replace(document, text=text, language=language)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def describe(text: str, data: ActionData) -> str:
    """What the action's span is, for messages: "selection", "statement on line 5", "lines 2-3"."""
    if data.kind in (SELECTION, FILE):
        return data.kind
    first = text.count("\n", 0, data.start) + 1
    last = text.count("\n", 0, max(data.start, data.end - 1)) + 1
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return where if data.kind == LINES else f"{data.kind} on {where}"


def _steps(stats: Any) -> str:
    retries = f", {stats.retries} syntax retry(ies)" if stats.retries else ""
    retries += f", {stats.token_edits} token edit(s)" if stats.token_edits else ""
    retries += f", {stats.fresh_fills} fresh fill(s)" if stats.fresh_fills else ""
    return f"{stats.steps} denoising step(s), {stats.forward_passes} forward pass(es){retries}"


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
