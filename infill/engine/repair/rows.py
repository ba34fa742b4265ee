"""The rows under repair: what each step of infill.engine.repair reads and improves."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from infill.engine.results import SampleResult, SampleStats, merge_stats
from infill.text.syntax import SyntaxProblem

TEMPERATURE = 0.8  # sampling temperature of a retry and of a fresh fill (at 0 the model, asked again,
#   would mostly say the same thing)


@dataclass
class Rows:
    """A filled canvas's rows (B, L) as the repair steps leave them, the problems each row's
    fills cause, and the statistics of the sampling and of every step run since."""

    ids: torch.Tensor
    confidence: torch.Tensor
    problems: list[list[SyntaxProblem]]
    stats: list[SampleStats] = field(default_factory=list)
    counted: int = 0  # forward passes counted against the pass budget before these rows' own

    @classmethod
    def of(cls, sampled: SampleResult, problems_of, counted: int = 0) -> Rows:
        ids = sampled.ids.clone()
        problems = [problems_of(ids[r : r + 1]) for r in range(ids.size(0))]
        return cls(ids, sampled.confidence.clone(), problems, [sampled.stats], counted)

    @property
    def forward_passes(self) -> int:
        return sum(stats.forward_passes for stats in self.stats)

    def passes_left(self, budget: int | None) -> int | None:
        """What `budget` (None: no limit) leaves after these rows' passes and those counted before."""
        return None if budget is None else budget - self.counted - self.forward_passes

    def spent(self, budget: int | None) -> bool:
        """Whether `budget` is spent: no step starts then."""
        left = self.passes_left(budget)
        return left is not None and left < 1

    def broken(self) -> list[int]:
        """The rows whose fills still cause a problem."""
        return [r for r, problems in enumerate(self.problems) if problems]

    def result(self) -> SampleResult:
        return SampleResult(self.ids, self.confidence, merge_stats(self.stats))
