"""Inline completion (LSP 3.18 ``textDocument/inlineCompletion``) as a plain function.

At the cursor the document gets an insertion point (an empty span), and the model writes what
goes there with the code before *and after* the cursor as context. The result is offered as
ghost text: an ``InlineCompletionItem`` whose range is the cursor itself (nothing is replaced).
Ghost text is asked for as the user types, so it gets at most :data:`SYNTAX_ROUNDS` syntax
retry and :data:`SYNTAX_EDITS` parser-checked token edits (the ``syntaxRounds`` and
``syntaxEdits`` settings still lower them; a fill action gets them all). Token edits nearly
doubled its time (``infill-bench lsp --threads 2``: 140 -> 259 ms with 2 edits), so it gets none.
Nor does it get fresh fills: the engine gives none to an insertion point (``infill.engine``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types

from infill.document import document_from_bytes
from infill.spans import Span
from lsp_server.positions import UTF16, offset_to_position

if TYPE_CHECKING:
    from infill.backend import Denoiser
    from infill.engine import InfillOptions

SYNTAX_ROUNDS = 1
SYNTAX_EDITS = 0


def inline_completions(
    denoiser: Denoiser,
    text: str,
    offset: int,
    options: InfillOptions | None = None,
    encoding: str = UTF16,
    alternatives: int = 1,
    cancelled: Callable[[], bool] | None = None,
) -> list[types.InlineCompletionItem]:
    """What to insert at character ``offset`` of ``text``: distinct, non-blank completions.

    With a temperature above 0, up to ``alternatives`` samples are drawn (seeds 0, 1, ...) and
    each distinct text is one item; at temperature 0 sampling is deterministic, so there is one
    run. An empty document, or a model that writes only nulls or blanks, gives no items.
    InputError for an offset outside the text; ``infill.errors.Cancelled`` if ``cancelled()``
    turns true.
    """
    from infill.engine import InfillOptions, infill  # torch: only when a completion runs

    if not text:
        return []
    options = options or InfillOptions()
    options = dataclasses.replace(
        options,
        syntax_rounds=min(options.syntax_rounds, SYNTAX_ROUNDS),
        syntax_edits=min(options.syntax_edits, SYNTAX_EDITS),
    )
    document = document_from_bytes(text.encode("utf-8", "surrogatepass"))
    span = Span(offset, offset, "cursor")
    runs = max(1, alternatives) if options.sampler.temperature > 0 else 1
    position = offset_to_position(text, offset, encoding)
    cursor = types.Range(start=position, end=position)
    items: list[types.InlineCompletionItem] = []
    seen: set[str] = set()
    first_seed = options.sampler.seed or 0
    for run in range(runs):
        run_options = options
        if runs > 1:
            sampler = dataclasses.replace(options.sampler, seed=first_seed + run)
            run_options = dataclasses.replace(options, sampler=sampler)
        result = infill(denoiser, document, [span], run_options, cancelled=cancelled)
        inserted = result.spans[0].new_text
        if inserted.strip() and inserted not in seen:
            seen.add(inserted)
            items.append(types.InlineCompletionItem(insert_text=inserted, range=cursor))
    return items
