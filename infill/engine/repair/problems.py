"""Which syntax problems a fill causes, and which of its tokens they touch.

Problems are counted with infill.text.syntax.file_problems, in the document's language: tree-sitter's
(in Python, else the one Python's own parser reports: tree-sitter misses bad indentation). In a
file that parsed before the fill every problem is the fill's doing; in one that did not (a quick
fix for a syntax error fills or repairs the statement around it), only the problems that touch a
fill are. tree-sitter often reports an unclosed bracket or a bad indent lines after the mistake,
outside every fill: such a problem is blamed on the last line of the nearest fill before it.

The fills' texts come from the decode stage's `Decoder` for the canvas (infill.engine.decode),
which the pipeline hands to the repair stage: the parser judges exactly the text the user gets.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import torch

from infill.text.syntax import SyntaxProblem, file_problems, overlaps

if TYPE_CHECKING:  # the decode stage of a canvas, handed down by the pipeline
    from infill.engine.decode import Decoder


class FillProblems:
    """The syntax problems of a canvas's fills, as a function of a row of ids (1, L).

    The document itself is parsed once, and only if a fill breaks the file."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder, self.document = decoder, decoder.document
        self._parsed_before: bool | None = None

    def __call__(self, row: torch.Tensor) -> list[SyntaxProblem]:
        """The problems that are the fills' doing: all of them in a file that parsed; in one
        that did not, those that touch a fill."""
        texts = self.decoder.texts(row)
        found = file_problems(self.decoder.spliced(texts), self.document.language)
        if found and self._parsed_before is None:
            self._parsed_before = not file_problems(self.document.text, self.document.language)
        if not found or self._parsed_before:
            return found
        extents = self.decoder.extents(texts)
        return [p for p in found if any(overlaps(p, start, end) for start, end in extents)]

    def blamed(self, row: torch.Tensor, problems: list[SyntaxProblem]) -> torch.Tensor:
        """(1, L) bool: the fill tokens `problems` touch (see `tokens_to_remask`)."""
        return tokens_to_remask(self.decoder, row, problems)


def tokens_to_remask(decoder: Decoder, ids: torch.Tensor, problems: list[SyntaxProblem]) -> torch.Tensor:
    """(1, L) bool: the fills' content tokens (not <null>) whose characters a problem touches (a
    missing token: the tokens on both sides of it). A problem that touches no fill is blamed on
    the last line of the nearest fill before it (or on the first fill's first line)."""
    texts = decoder.texts(ids)
    extents = decoder.extents(texts)
    ranges: list[list[tuple[int, int]]] = [[] for _ in decoder.canvas.slots]  # per fill, in its own text
    for problem in problems:
        touched = [i for i, (a, b) in enumerate(extents) if overlaps(problem, a, b)]
        for i in touched:
            ranges[i].append((problem.start - extents[i][0], problem.end - extents[i][0]))
        if not touched:
            before = bisect.bisect_right([end for _, end in extents], problem.start) - 1
            text = texts[max(before, 0)]
            if before >= 0:  # the last line of the fill before
                ranges[before].append((text.rfind("\n") + 1, len(text)))
            else:  # the first line of the first fill
                ranges[0].append((0, len(text.split("\n")[0])))
    remask = torch.zeros_like(ids, dtype=torch.bool)
    row = ids[0].tolist()
    for slot, wanted in zip(decoder.canvas.slots, ranges):
        for position, (a, b) in decoder.token_offsets(slot, row) if wanted else ():
            if any(a < hi and lo < b if lo < hi else a <= lo <= b for lo, hi in wanted):
                remask[0, position] = True
    return remask

