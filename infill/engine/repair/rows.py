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

    @classmethod
    def of(cls, sampled: SampleResult, problems_of) -> Rows:
        ids = sampled.ids.clone()
        problems = [problems_of(ids[r : r + 1]) for r in range(ids.size(0))]
        return cls(ids, sampled.confidence.clone(), problems, [sampled.stats])

    @property
    def forward_passes(self) -> int:
        return sum(stats.forward_passes for stats in self.stats)

    def result(self) -> SampleResult:
        return SampleResult(self.ids, self.confidence, merge_stats(self.stats))
