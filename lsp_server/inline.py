"""Inline completion (LSP 3.18 ``textDocument/inlineCompletion``) as a plain function.

At the cursor the document gets an insertion point (an empty span), and the model writes what
goes there with the code before *and after* the cursor as context (:mod:`infill.modes.inline`:
at most one syntax retry and no token edits, as the user is typing). The result is offered as
ghost text: an ``InlineCompletionItem`` whose range is the cursor itself (nothing is replaced).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from infill.text.languages import PYTHON, Language
from lsp_server.actions import text_document
from lsp_server.positions import UTF16, offset_to_position

if TYPE_CHECKING:
    from infill.engine.pipeline import Hooks
    from infill.models.base import Denoiser
    from infill.options import InfillOptions


def inline_completions(
    denoiser: Denoiser,
    text: str,
    offset: int,
    options: InfillOptions | None = None,
    encoding: str = UTF16,
    alternatives: int = 1,
    hooks: Hooks | None = None,
    language: Language = PYTHON,
) -> list[types.InlineCompletionItem]:
    """What to insert at character ``offset`` of ``text``: distinct, non-blank completions.

    With a temperature above 0, up to ``alternatives`` samples are drawn (seeds 0, 1, ...) and
    each distinct text is one item; at temperature 0 sampling is deterministic, so there is one
    run. An empty document, or a model that writes only nulls or blanks, gives no items.
    InputError for an offset outside the text, or for a text no file could hold (the editor's
    text becomes a document as for every action: :func:`lsp_server.actions.text_document`);
    ``infill.errors.Cancelled`` if ``hooks.cancelled()`` turns true.
    """
    from infill.engine.pipeline import run
    from infill.modes.inline import InlineRequest  # torch: only when a completion runs
    from infill.options import InfillOptions

    if not text:
        return []
    document = text_document(text, language)
    request = InlineRequest(document, offset, options or InfillOptions(), alternatives)
    completions = run(denoiser, request, hooks)
    position = offset_to_position(text, offset, encoding)
    cursor = types.Range(start=position, end=position)
    return [types.InlineCompletionItem(insert_text=inserted, range=cursor) for inserted in completions.texts]
