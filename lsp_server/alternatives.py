"""Alternatives as code actions: several fills of a selection, sampled as one batch, each offered
as its own action, ranked by the model's score (those that keep the file parsing first).

``codeAction/resolve`` answers one action with one edit, and listing must stay instant (no model
run), so the candidates cannot all be listed up front. The flow:

1. Listing a selection offers "Infill: fill selection (N alternatives)" (mode "alternative", no
   candidate; :mod:`lsp_server.actions`).
2. Resolving it runs :class:`infill.modes.AlternativesRequest` once (one batch of N rows) and
   answers with the best candidate's edit. The candidates are kept as an :class:`AlternativeSet`
   for the document: the text at that version, the span, and every distinct candidate, best first.
3. The client applies the edit; its ``didChange`` text is the old text with the best candidate in
   the span. :meth:`AlternativeSet.follow` recognises that (the new text is the old one with some
   candidate in the span), so the set moves to the new version with the span now holding that
   candidate. Any other change drops the set: it is stale.
4. Listing code actions over (or at the edge of) the span now offers the other candidates,
   *already resolved*: "Infill: alternative 2 of 4 (score -0.83)" ..., in rank order, each a
   versioned edit that swaps the candidate in the span for that one. Applying one moves the set
   again, so the user can step through all of them (the first one included); undo restores the
   original text as usual. If the client did not apply the first edit (a refused preview), the
   set is still at the listed version and every candidate is offered, the best as "alternative 1".

The score is the model's own: the mean log-probability of the span's tokens (higher: likelier).
One set per document (a newer run replaces it); closing the document drops it. An "alternative"
action that a client resolves anyway is answered from the set, or ContentModified when the set
has moved on or gone. Plain functions and a plain class: nothing here knows about the server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from infill.errors import InputError
from infill.text.edits import minimal_edit
from infill.text.languages import PYTHON, Language
from infill.text.spans import Span
from lsp_server.actions import (
    ALTERNATIVE,
    ALTERNATIVES_KIND,
    SELECTION,
    ActionData,
    Outcome,
    check_span,
    text_document,
    workspace_edit,
)
from lsp_server.positions import UTF16

if TYPE_CHECKING:
    from infill.engine.pipeline import Hooks
    from infill.models.base import Denoiser
    from infill.options import InfillOptions


class StaleAlternatives(Exception):
    """The alternatives asked for belong to a version of the document that is gone."""


@dataclass(frozen=True)
class AlternativeSet:
    """Distinct candidates for one span of ``uri``; ``text`` is the document at ``version``, and
    ``text[start:end]`` holds candidate ``current`` (None: the original text)."""

    uri: str
    version: int | None
    text: str
    start: int
    end: int
    candidates: tuple[tuple[str, float], ...]  # (new text, score), best first
    sampled: int  # rows in the batch (candidates are the distinct ones)
    current: int | None = None

    # ------------------------------------------------------------------ edits

    def outcome(self, candidate: int) -> Outcome:
        """The minimal edit that puts ``candidate`` in the span, and a description of it."""
        if not 0 <= candidate < len(self.candidates):
            count = len(self.candidates)
            raise InputError(f"there are only {count} alternatives (asked for #{candidate + 1})")
        new_text, score = self.candidates[candidate]
        edit = minimal_edit(self.text, self.start, self.end, new_text)
        summary = (
            f"alternative {candidate + 1} of {len(self.candidates)} "
            f"({self.sampled} sampled in one batch), score {score:.2f} (mean log-probability)"
        )
        return Outcome([edit] if edit else [], summary, None if edit else "it is the text already there")

    def edit(
        self, candidate: int, encoding: str = UTF16, document_changes: bool = True, annotate: bool = False
    ) -> types.WorkspaceEdit:
        outcome = self.outcome(candidate)
        return workspace_edit(
            self.uri, self.version, self.text, outcome, encoding, document_changes, annotate
        )

    def actions(
        self, encoding: str = UTF16, document_changes: bool = True, annotate: bool = False
    ) -> list[types.CodeAction]:
        """A resolved action per candidate not in the span now, best first."""
        found = []
        for index, (new_text, score) in enumerate(self.candidates):
            if index == self.current or self.text[self.start : self.end] == new_text:
                continue
            title = f"Infill: alternative {index + 1} of {len(self.candidates)} (score {score:.2f})"
            data = ActionData(self.uri, self.version, SELECTION, self.start, self.end, ALTERNATIVE, index)
            action = types.CodeAction(title=title, kind=ALTERNATIVES_KIND, data=data.to_json())
            action.edit = self.edit(index, encoding, document_changes, annotate)
            found.append(action)
        return found

    # ------------------------------------------------------------------ following the document

    def covers(self, start: int, end: int) -> bool:
        """Whether the range ``[start, end]`` touches the span (ends included)."""
        return start <= self.end and self.start <= end

    def follow(self, version: int | None, text: str) -> AlternativeSet | None:
        """This set at ``version`` if ``text`` is this set's text with some candidate in the
        span (the client applied one of our edits) or unchanged; None if it is anything else."""
        if text == self.text:
            return dataclasses.replace(self, version=version)
        before, after = self.text[: self.start], self.text[self.end :]
        if not (text.startswith(before) and text.endswith(after)):
            return None
        inside = text[len(before) : len(text) - len(after)]
        for index, (new_text, _) in enumerate(self.candidates):
            if inside == new_text:
                end = self.start + len(new_text)
                return dataclasses.replace(self, version=version, text=text, end=end, current=index)
        return None


def sample_alternatives(
    denoiser: Denoiser,
    text: str,
    data: ActionData,
    n: int,
    options: InfillOptions | None = None,
    hooks: Hooks | None = None,
    language: Language = PYTHON,
) -> AlternativeSet:
    """Sample ``n`` fills of the span of ``data`` as one batch (at the options' temperature if it
    is above 0, else 0.8); the distinct ones, best first, as a set at ``data.version``."""
    from infill.engine.pipeline import run
    from infill.modes.alternatives import AlternativesRequest
    from infill.options import InfillOptions

    check_span(text, data)
    document = text_document(text, language)
    span = Span(data.start, data.end, data.kind)
    request = AlternativesRequest(document, span, n, options or InfillOptions())
    found = run(denoiser, request, hooks)
    candidates = tuple((candidate.new_text, candidate.score) for candidate in found)
    return AlternativeSet(data.uri, data.version, text, data.start, data.end, candidates, n)


class AlternativeSets:
    """The latest :class:`AlternativeSet` of each document, following its versions."""

    def __init__(self) -> None:
        self._sets: dict[str, AlternativeSet] = {}

    def put(self, found: AlternativeSet) -> None:
        self._sets[found.uri] = found

    def get(self, uri: str) -> AlternativeSet | None:
        return self._sets.get(uri)

    def changed(self, uri: str, version: int | None, text: str) -> None:
        """The document changed: follow it, or drop the set if it is stale now."""
        found = self._sets.get(uri)
        if found is None:
            return
        followed = found.follow(version, text)
        if followed is None:
            del self._sets[uri]
        else:
            self._sets[uri] = followed

    def closed(self, uri: str) -> None:
        self._sets.pop(uri, None)

    def actions(
        self,
        uri: str,
        version: int | None,
        start: int,
        end: int,
        encoding: str = UTF16,
        document_changes: bool = True,
        annotate: bool = False,
    ) -> list[types.CodeAction]:
        """The resolved alternatives for a listing of ``[start, end]`` at ``version`` (none if
        the range does not touch the span or the set is of another version)."""
        found = self._sets.get(uri)
        if found is None or found.version != version or not found.covers(start, end):
            return []
        return found.actions(encoding, document_changes, annotate)

    def edit(
        self,
        data: ActionData,
        encoding: str = UTF16,
        document_changes: bool = True,
        annotate: bool = False,
    ) -> types.WorkspaceEdit:
        """The edit of the ``data.candidate`` listed for ``data``; StaleAlternatives if the set
        has moved to another version or span since."""
        found = self._sets.get(data.uri)
        if found is None or (found.version, found.start, found.end) != (data.version, data.start, data.end):
            raise StaleAlternatives(
                f"these alternatives of {data.uri} are gone (the document or the span changed): ask again"
            )
        assert data.candidate is not None
        return found.edit(data.candidate, encoding, document_changes, annotate)
