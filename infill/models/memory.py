"""How the C library's allocator serves a network's memory: blocks apart while loading, reused
by the passes after, given back after each pass over the whole canvas.

PyTorch's CPU tensors come from the C library's `malloc`. glibc's maps every block above a
threshold apart (`mmap`) and unmaps it when freed, and keeps smaller ones in its heap for reuse.
Three settings serve this project, all process-wide (they are the C library's):

- **While loading** (`return_big_blocks`; `loading_blocks` around a network's loading, in
  infill.models.weights and the bench's random networks): every block of `BIG_BLOCK` or
  more is mapped apart, so the checkpoint's tensors and the packing's scratch go back to the
  system the moment they are freed.
- **After loading** (`keep_blocks`): a block mapped afresh costs its pages' first touch (the
  kernel zeroes each page and maps it in), and a pass makes the same blocks layer after layer and
  pass after pass: the 0.5B shape's full pass over 512 tokens touched 150,000-200,000 fresh pages
  and spent a quarter of its time on them. So the passes take blocks up to `PASS_BLOCK` from the
  heap, which keeps what is freed for the next ones.
- **After each pass over the whole canvas** (`give_back`, called by the denoisers): the heap's
  free pages go back to the system (`malloc_trim`). Left alone, a heap that keeps what it is
  given grows with fragmentation: blocks up to 16 MiB from it for the process's whole life took
  the peaks past issue 37's. A whole-canvas pass (an idle refresh, a fill's first pass) makes the
  most blocks and comes often enough.

docs/models.md, "A pass's blocks from the heap". Where the C library has no `mallopt` (macOS,
Windows) nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
BIG_BLOCK = 2**20  # bytes: while loading, a block this big or bigger is mapped apart
PASS_BLOCK = 2**25  # bytes: after loading, blocks below this come from the heap (glibc's largest allowed)
TRIM_DEFAULT = 128 * 2**10  # glibc's default: free memory kept at the top of the heap
KEPT_FREE = 2**30  # after loading: the heap's top is not given back block by block, but by give_back


@functools.cache
def _c_library():
    """The process's C library (its mallopt and malloc_trim), or None where it cannot be opened.
    Every setting here is looked up on it, so a C library without one changes nothing."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library to open by that name (Windows)
        return None


def _mallopt(parameter: int, value: int) -> None:
    mallopt = getattr(_c_library(), "mallopt", None)
    if mallopt is not None:
        mallopt(parameter, value)


def return_big_blocks() -> None:
    """Every block of `BIG_BLOCK` bytes or more mapped apart, given back the moment it is freed,
    and glibc's default for the free memory kept at the top of the heap (loading a network)."""
    _mallopt(M_MMAP_THRESHOLD, BIG_BLOCK)
    _mallopt(M_TRIM_THRESHOLD, TRIM_DEFAULT)


def keep_blocks() -> None:
    """Blocks below `PASS_BLOCK` from the heap, which keeps them when freed for the next ones (a
    loaded network's passes); the heap gives them back at `give_back`."""
    _mallopt(M_MMAP_THRESHOLD, PASS_BLOCK)
    _mallopt(M_TRIM_THRESHOLD, KEPT_FREE)


@contextlib.contextmanager
def loading_blocks() -> Iterator[None]:
    """Around a network's loading: big blocks mapped apart while it loads (`return_big_blocks`),
    kept for its passes once it is done, or has failed (`keep_blocks`)."""
    return_big_blocks()
    try:
        yield
    finally:
        keep_blocks()


def give_back() -> bool:
    """The free memory of every malloc arena back to the system (`malloc_trim`): after a pass
    over the whole canvas, and on a server's beat (team_server.memory); False where the C library
    has none (not glibc)."""
    trim = getattr(_c_library(), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True
