"""An `infill-bench` command with infill's C sources built for another kind of x86-64 CPU than this
one (`-march=MARCH` where infill builds with `-march=native`): the 4-bit kernel, the layers' small
operations and the bfloat16 product take the code paths that CPU would build, here on this CPU's
cores and memory. It runs them whole (a fill, not a layer: tests/models/test_int4_native.py checks
the kernel's 256-bit products alone) and says how fast those paths are on this machine; not how
fast that CPU is. This CPU must have what MARCH needs (alderlake: AVX-VNNI; x86-64-v3: AVX2).

    python docs/experiments/other_cpu.py alderlake shapes --shapes dream-7b --passes 8 --repeat 1 \\
        --threads 2 --line-tokens 16 --block-length 4 --block-passes --dtype float32 --quantize int4
"""

from __future__ import annotations

import sys

from infill.models import c_build


def main() -> int:
    march, argv = sys.argv[1], sys.argv[2:]
    needs = c_build.OTHER_CPUS[march]
    if needs not in c_build.cpu_flags().split():
        raise SystemExit(f"this CPU cannot run code built for {march} (no {needs})")
    native = c_build.build_library

    def build_for_march(source, flags=c_build.FLAGS, refusal=None):
        return native(source, c_build.flags_for(march, flags), refusal)

    c_build.build_library = build_for_march  # every build_unless_switched goes through it
    from infill.bench import cli

    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
