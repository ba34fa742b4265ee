"""The C allocator's settings around a pass (infill.models.memory): where a big block comes from
inside and outside a whole-canvas pass, and that the heap's memory goes back after it. glibc's
malloc only (the settings do nothing elsewhere). Each check runs in a fresh interpreter: a process
that has run passes keeps free chunks in its heap, and glibc serves a big block from one of those
whatever the setting."""

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
import ctypes, threading
from infill.models.memory import pass_memory, return_big_blocks

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

return_big_blocks()  # as after loading a network
'''


def run_probe(check: str) -> None:
    """`check` after PROBE's helpers in a fresh interpreter; fails with its output if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE + textwrap.dedent(check)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_big_block_comes_from_the_heap_only_inside_a_whole_canvas_pass():
    run_probe("""
        assert not from_heap()
        with pass_memory():
            assert from_heap()
        assert not from_heap()
        with pass_memory(whole_canvas=False):  # a span pass: blocks stay apart
            assert not from_heap()
    """)


def test_the_heap_stays_while_any_pass_is_inside_even_from_another_thread():
    run_probe("""
        entered, leave = threading.Event(), threading.Event()

        def other_pass():
            with pass_memory():
                entered.set()
                leave.wait(10)

        thread = threading.Thread(target=other_pass)
        thread.start()
        assert entered.wait(10)
        with pass_memory():
            pass  # this pass ends while the other one runs
        assert from_heap()
        leave.set()
        thread.join(10)
        assert not thread.is_alive() and not from_heap()
    """)


def test_what_a_pass_freed_goes_back_to_the_system_when_it_ends():
    run_probe("""
        before = resident_mib()
        with pass_memory():
            blocks = [libc.malloc(BLOCK) for _ in range(64)]  # 256 MiB, touched
            for pointer in blocks:
                ctypes.memset(pointer, 1, BLOCK)
            assert resident_mib() > before + 200
            for pointer in blocks:
                libc.free(pointer)
        assert resident_mib() < before + 32, resident_mib() - before
    """)
