"""infill: code infilling and editing with a masked-diffusion language model."""

import os

# PyTorch's CPU allocator: blocks of 2 MiB or more on huge pages (read once, at the first such
# block, so before any): a 512-token pass's activations then fault in 2 MiB at a time instead of
# 4 KiB, which made the 0.5B shape's full pass 1.0 -> 0.8 s and the 7B's 10.0 -> 7.9 s at the same
# peak (docs/models.md, "infill's own 4-bit kernel"). A value already set is kept.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

__version__ = "0.1.0"
