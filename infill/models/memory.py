"""How the C library's allocator serves a network's memory: apart between passes, reused in a pass.

PyTorch's CPU tensors come from the C library's `malloc`. glibc's maps every block above a
threshold apart (`mmap`) and unmaps it when freed, and keeps smaller ones in its heap for reuse.
Two settings of that threshold serve this project, both process-wide (they are the C library's):

- **Between passes, and while loading** (`return_big_blocks`): every block of `BIG_BLOCK` or more
  is mapped apart, so it goes back to the system the moment it is freed. By default glibc raises
  the threshold to the largest block freed so far (up to 32 MiB): after loading, a pass's
  activations then stay in its heap when freed and the heap grows with fragmentation (Open-dCoder
  0.5B's shape, int8, `infill-bench shapes`: peak 1,779 -> 1,413 MiB with blocks apart).
- **During a pass** (`pass_memory`): a block mapped afresh costs its pages' first touch (the
  kernel zeroes each page and maps it in), and a 512-token pass makes the same blocks layer after
  layer: the 0.5B shape's full pass touched some 45,000 fresh pages and spent a sixth of its time
  on them. So inside a pass blocks up to `PASS_BLOCK` come from the heap, which keeps what is
  freed for the next layer's blocks; when the last pass running ends, the heap's free pages go
  back to the system (`malloc_trim`), so that between passes the process holds what it held
  before. docs/models.md, "A pass's blocks from the heap".

Where the C library has no `mallopt` (macOS, Windows, musl's stubs aside) nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
BIG_BLOCK = 2**20  # bytes: between passes, a block this big or bigger is mapped apart
PASS_BLOCK = 2**25  # bytes: in a pass, blocks below this come from the heap (glibc's largest allowed)
TRIM_DEFAULT = 128 * 2**10  # glibc's default: free memory kept at the top of the heap
TRIM_IN_PASS = 2**30  # in a pass: the heap's top is not given back block by block


@functools.cache
def _c_library():
    """The process's C library (its mallopt and malloc_trim), or None where it cannot be opened."""
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library to open by that name (Windows)
        return None


def _mallopt(parameter: int, value: int) -> None:
    mallopt = getattr(_c_library(), "mallopt", None)
    if mallopt is not None:
        mallopt(parameter, value)


def malloc_trim() -> bool:
    """The free memory of every malloc arena given back to the system; False where the C library
    has no malloc_trim (not glibc)."""
    trim = getattr(_c_library(), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def return_big_blocks() -> None:
    """Every block of `BIG_BLOCK` bytes or more mapped apart, given back the moment it is freed
    (once a network is being loaded: infill.models.weights). Blocks up to 16 MiB from the heap
    made a 512-token pass much faster but the peaks grew past issue 37's (docs/models.md,
    "infill's own 4-bit kernel"); those blocks come on huge pages instead (THP_MEM_ALLOC_ENABLE,
    infill/__init__.py), and inside a pass from the heap (`pass_memory`)."""
    _mallopt(M_MMAP_THRESHOLD, BIG_BLOCK)


class _PassesRunning:
    """How many passes are inside `pass_memory` now, in every thread (the language server's
    refresh and a fill can overlap): the heap's setting is the process's, so its count is too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0


_RUNNING = _PassesRunning()


@contextmanager
def pass_memory(whole_canvas: bool = True) -> Iterator[None]:
    """While inside a pass over the whole canvas, blocks below `PASS_BLOCK` come from the heap and
    are reused as they are freed; when the last such pass ends, blocks are mapped apart again
    (`return_big_blocks`) and the heap's free pages go back to the system. A tensor made inside
    and kept after (the pass's cache, its logits) is heap memory like any other. A span pass
    (`whole_canvas` False) changes nothing: its blocks are few and small, and in the heap its fills
    were no faster (heap pages fault in 4 KiB at a time, where PyTorch asks huge pages for blocks
    of 2 MiB or more; docs/models.md)."""
    if not whole_canvas:
        yield
        return
    with _RUNNING.lock:
        if _RUNNING.count == 0:
            _mallopt(M_MMAP_THRESHOLD, PASS_BLOCK)
            _mallopt(M_TRIM_THRESHOLD, TRIM_IN_PASS)
        _RUNNING.count += 1
    try:
        yield
    finally:
        with _RUNNING.lock:
            _RUNNING.count -= 1
            if _RUNNING.count == 0:
                _mallopt(M_TRIM_THRESHOLD, TRIM_DEFAULT)
                return_big_blocks()
                malloc_trim()
