"""The k most likely tokens at each position of a pass (`top`): what the sampler chooses among
when the vocabulary is large (infill.engine.unmasking.candidates), by a C routine beside this file
(top_candidates.c, built at first use as infill's kernels are: infill.models.c_build), else
PyTorch's topk. The same values and indices as topk, largest first; among equal values, the lowest
indices first (topk leaves their order open).

Why: PyTorch's topk over a 152k-token vocabulary took 0.4 ms for a pass of 4 positions and 3.6 ms
for one of 32 on two cores (2026-12-08, a Zen 5), 6% of a 0.5B network's ready fill; this takes
0.22 (on one thread: `ROWS_A_THREAD`) and 1.2 (docs/models.md, "The candidates of a pass in C")."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from infill.models.c_build import Build, build_unless_switched, inference_on_cpu

SOURCE = Path(__file__).with_name("top_candidates.c")
SWITCH = "INFILL_TOP_CANDIDATES"  # "pytorch": PyTorch's topk (for comparisons)
ROWS_A_THREAD = 4
"""A thread for every this many positions at least (a row of 152k tokens takes about 55 us on one
thread): a 4-position pass on one thread (0.22 ms), and no team of threads for a few rows where many
requests' threads each call it at once (a GPU replica's, whose torch threads are the machine's)."""


@functools.cache
def build() -> Build:
    return build_unless_switched(SWITCH, SOURCE, declared)


def declared(library: ctypes.CDLL) -> ctypes.CDLL:
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    library.infill_top_candidates.argtypes = [pointer, size, size, size, pointer, pointer, ctypes.c_int]
    library.infill_top_candidates.restype = ctypes.c_int
    return library


def top(probs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., vocab) probabilities -> (values, indices), each (..., k): the k largest of each row,
    largest first (k at most the vocabulary)."""
    library = build().library
    served = library is not None and probs.dtype == torch.float32 and probs.is_contiguous()
    if not served or not inference_on_cpu(probs) or not 0 < k <= probs.shape[-1]:
        return tuple(probs.topk(k, dim=-1))
    values = probs.new_empty(*probs.shape[:-1], k)
    indices = torch.empty(*probs.shape[:-1], k, dtype=torch.long)
    rows = probs.numel() // probs.shape[-1]
    threads = max(1, min(torch.get_num_threads(), rows // ROWS_A_THREAD))
    if rows and library.infill_top_candidates(probs.data_ptr(), rows, probs.shape[-1], k, values.data_ptr(),
                                              indices.data_ptr(), threads):  # fmt: skip
        raise MemoryError("the top candidates' C call found no memory for its scratch")
    return values, indices
