"""The C allocator's settings (infill.models.memory): where a big block comes from while loading
and after, that what the heap keeps goes back when given back, and that a pass over the whole
canvas gives it back where a span pass does not. glibc's malloc only (the settings do nothing
elsewhere). Each check runs in a fresh interpreter: a process that has run passes keeps free
chunks in its heap, and glibc serves a big block from one of those whatever the setting."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc settings"
)

PROBE = '''
import ctypes
from infill.models.memory import give_back, keep_blocks, return_big_blocks

BLOCK = 4 * 2**20  # above the 1 MiB mapped apart between passes, below the 32 MiB of a pass
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def from_heap(size=BLOCK):
    """Whether a block malloc'd now comes from an arena, not a mapping of its own: glibc marks a
    mapped chunk in the size word just before the block (IS_MMAPPED, 0x2)."""
    pointer = libc.malloc(size)
    try:
        return not ctypes.c_size_t.from_address(pointer - ctypes.sizeof(ctypes.c_size_t)).value & 0x2
    finally:
        libc.free(pointer)

def resident_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

'''


def run_probe(check: str) -> None:
    """`check` after PROBE's helpers in a fresh interpreter; fails with its output if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE + textwrap.dedent(check)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_big_block_is_mapped_apart_while_loading_and_comes_from_the_heap_after():
    run_probe("""
        return_big_blocks()  # as a network's loading starts
        assert not from_heap()
        keep_blocks()  # as it ends
        assert from_heap()
        give_back()
        return_big_blocks()
        assert not from_heap()
    """)


def test_what_the_heap_keeps_goes_back_to_the_system_when_given_back():
    run_probe("""
        keep_blocks()
        before = resident_mib()
        blocks = [libc.malloc(BLOCK) for _ in range(64)]  # 256 MiB, touched
        for pointer in blocks:
            ctypes.memset(pointer, 1, BLOCK)
        for pointer in blocks:
            libc.free(pointer)
        assert resident_mib() > before + 200  # kept for the next pass's blocks
        give_back()
        assert resident_mib() < before + 32, resident_mib() - before
    """)


def test_a_pass_over_the_whole_canvas_gives_the_heap_back_and_a_span_pass_does_not():
    run_probe("""
        import torch
        from infill.bench.shapes import random_denoiser

        denoiser = random_denoiser("open-dcoder-0.5b-tiny", torch.device("cpu"), torch.float32, "none")
        ids, cache = torch.randint(100, 5000, (1, 64)), denoiser.new_cache()

        def held_after(refresh):
            blocks = [libc.malloc(BLOCK) for _ in range(64)]  # 256 MiB the heap keeps when freed
            for pointer in blocks:
                ctypes.memset(pointer, 1, BLOCK)
            for pointer in blocks:
                libc.free(pointer)
            before = resident_mib()
            denoiser.cached_logits(ids, torch.tensor([10, 11]), cache, refresh=refresh)
            return before - resident_mib()

        assert held_after(refresh=True) > 200  # given back
        assert held_after(refresh=False) < 32  # kept
    """)
