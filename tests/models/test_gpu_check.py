"""docs/experiments/gpu_check.py, issue 26's GPU check, runs on the CPU as it will on a GPU: the
tiny checkpoints' predictions equal transformers' own models' in float32 and the authors' ids
equal themselves; a broken comparison (the Dream family's shift forgotten: 35% agreement) fails."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "experiments" / "gpu_check.py"


@pytest.mark.slow
def test_the_gpu_check_passes_on_the_cpu_in_float32(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    argv = ["--device", "cpu", "--dtype", "float32", "--families", "Dream,LLaDA", "--shapes", "",
            "--out", str(tmp_path)]  # fmt: skip
    assert gpu_check.main(argv) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [row["family"] for row in report["families"]] == ["Dream", "LLaDA"]
    for row in report["families"]:
        assert row["agreement_with_transformers"] == 1.0 and row["max_logprob_difference"] < 1e-3
        assert row["span_only_pass_agreement"] == 1.0 and row["authors_ids_equal_cpu_float32"] is True
        assert row["int4_agreement_with_float"] >= gpu_check.AGREEMENT  # clear margins: few flips
        assert row["int4_max_logprob_difference"] > 0  # but the weights did change
