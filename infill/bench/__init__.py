"""Benchmarks and evaluation: outside the runtime's way, calling the pipeline like any user.

infill-bench quality | speed | lsp | sizes | shapes     (infill.bench.cli)
tasks.py     held-out tasks       quality.py   scoring and summaries
sizes.py     model sizes on the CPU engine    shapes.py  the open models' shapes
evalset/     the execution-checked functions of the exec kinds
"""

from infill.bench.cli import main

__all__ = ["main"]
