"""infill's 4-bit kernel built for another CPU than this one's `-march=native`: the 256-bit paths
of the C source (AVX-VNNI's products, AVX2's), which a CPU with AVX-512 can run too, so that their
numbers and their rates are tested wherever the CPU has the instructions."""

from __future__ import annotations

import ctypes

import pytest

from infill.models import c_build, int4_native
from infill.models.c_build import OTHER_CPUS


def built_for(march: str, folder) -> ctypes.CDLL:
    """The kernel built for `march` ("native": this CPU's own build); skipped where this CPU cannot run it."""
    if march == "native":
        return int4_native.build().library
    if OTHER_CPUS[march] not in c_build.cpu_flags().split():
        pytest.skip(f"NOT TESTED: this CPU cannot run code built for {march} (no {OTHER_CPUS[march]})")
    flags = c_build.flags_for(march, int4_native.FLAGS)
    build = c_build.build_elsewhere(int4_native.SOURCE, folder, int4_native.declared, flags)
    assert build.library is not None, build.reason
    return build.library
