"""The 4-bit network kept on disk (infill.models.packed_cache): a second load of a checkpoint reads
what the first one packed, the same tensors to the bit and the same logits; any change to the
checkpoint is another file, a broken file is removed and the checkpoint packed again, and
INFILL_PACKED_CACHE=off keeps nothing. Tiny checkpoints in the released layouts, kept with
INFILL_PACKED_CACHE=always (by default only checkpoints of 256 MiB and up are)."""

from __future__ import annotations

import os

import pytest
import torch
from checkpoints import masked_canvas, write_checkpoint
from safetensors import safe_open

from infill.models import int4_native, load, packed_cache
from infill.models.int4 import Int4Linear
from infill.models.int4_native import NativeInt4Linear
from infill.models.quantize import Int8Embedding

FAMILIES = ["Dream", "LLaDA", "Open-dCoder"]  # untied and tied output layers, both decoders' names


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """infill's cache folder in the test's own folder; every checkpoint big enough to keep."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(packed_cache.SWITCH, "always")
    return tmp_path / "cache" / "infill" / packed_cache.FOLDER


def kept_files(folder):
    return sorted(folder.glob("*.safetensors")) if folder.exists() else []


def tensors(denoiser) -> dict[str, torch.Tensor]:
    return denoiser.network.state_dict()


def same_tensors(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a
    )


def logits(denoiser) -> torch.Tensor:
    ids, _ = masked_canvas(denoiser, "def add(a, b):\n    return a + b\n", 6)
    return denoiser.logits(ids)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_second_load_reads_the_packed_network_the_first_kept(tmp_path, cache, family, capfd):
    folder = tmp_path / family
    write_checkpoint(folder, family)
    first = load(folder, quantize="int4")
    assert "kept the packed network" in capfd.readouterr().err
    (kept,) = kept_files(cache)
    second = load(folder, quantize="int4")
    assert f"the packed network from {kept}" in capfd.readouterr().err
    assert kept_files(cache) == [kept]
    with safe_open(str(kept), framework="pt") as file:  # a safetensors file as the library reads them
        assert all(torch.equal(file.get_tensor(k), v) for k, v in tensors(first).items())
    assert same_tensors(tensors(first), tensors(second))
    layer = NativeInt4Linear if int4_native.available() else Int4Linear
    modules = list(second.network.modules())
    assert any(isinstance(m, layer) for m in modules) and any(isinstance(m, Int8Embedding) for m in modules)
    assert not any(t.is_meta for t in second.network.state_dict(keep_vars=True).values())
    assert torch.equal(logits(first), logits(second))


def test_with_pytorchs_kernel_its_own_layers_come_back(tmp_path, cache):
    os.environ[int4_native.SWITCH] = "pytorch"
    int4_native.build.cache_clear()
    try:
        write_checkpoint(tmp_path / "Dream", "Dream")
        first = load(tmp_path / "Dream", quantize="int4")
        second = load(tmp_path / "Dream", quantize="int4")
        assert any(isinstance(m, Int4Linear) for m in second.network.modules())
        assert same_tensors(tensors(first), tensors(second))
        assert torch.equal(logits(first), logits(second))
        assert len(kept_files(cache)) == 1
    finally:
        del os.environ[int4_native.SWITCH]
        int4_native.build.cache_clear()
    if int4_native.available():  # infill's kernel is another key: its file replaces PyTorch's
        (pytorchs,) = kept_files(cache)
        load(tmp_path / "Dream", quantize="int4")
        (infills,) = kept_files(cache)
        assert infills != pytorchs


def test_a_changed_checkpoint_is_packed_again_and_its_old_file_goes(tmp_path, cache):
    folder = tmp_path / "Dream"
    write_checkpoint(folder, "Dream", seed=0)
    load(folder, quantize="int4")
    (old,) = kept_files(cache)
    write_checkpoint(folder, "Dream", seed=1)  # other weights in the same files
    shard = next(folder.glob("*.safetensors"))
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    fresh = load(folder, quantize="int4")
    (new,) = kept_files(cache)
    assert new != old
    packed = load(folder, quantize="int4")
    assert torch.equal(logits(fresh), logits(packed))
    without = tmp_path / "without"
    write_checkpoint(without, "Dream", seed=1)
    os.environ[packed_cache.SWITCH] = "off"
    try:
        assert torch.equal(logits(load(without, quantize="int4")), logits(packed))  # seed 1's numbers
    finally:
        os.environ[packed_cache.SWITCH] = "always"


def test_a_broken_file_is_removed_and_the_checkpoint_packed_again(tmp_path, cache, capfd):
    folder = tmp_path / "Open-dCoder"
    write_checkpoint(folder, "Open-dCoder")
    first = load(folder, quantize="int4")
    (kept,) = kept_files(cache)
    whole = kept.stat().st_size
    kept.write_bytes(kept.read_bytes()[: whole // 2])  # cut short
    capfd.readouterr()
    again = load(folder, quantize="int4")
    assert "does not fit" in capfd.readouterr().err
    assert torch.equal(logits(first), logits(again))
    (rewritten,) = kept_files(cache)
    assert rewritten == kept and rewritten.stat().st_size == whole  # written whole again
    kept.write_bytes(b"")  # emptied
    assert torch.equal(logits(first), logits(load(folder, quantize="int4")))
    assert kept.stat().st_size == whole
    assert same_tensors(tensors(first), tensors(load(folder, quantize="int4")))


def test_nothing_is_kept_when_switched_off_or_for_other_forms_or_small_checkpoints(
    tmp_path, cache, monkeypatch
):
    folder = tmp_path / "Dream"
    write_checkpoint(folder, "Dream")
    monkeypatch.setenv(packed_cache.SWITCH, "off")
    load(folder, quantize="int4")
    assert kept_files(cache) == []
    monkeypatch.setenv(packed_cache.SWITCH, "always")
    load(folder, quantize="int8")
    load(folder, quantize="none")
    assert kept_files(cache) == []
    monkeypatch.delenv(packed_cache.SWITCH)  # the default: checkpoints of 256 MiB and up
    load(folder, quantize="int4")
    assert kept_files(cache) == []
    assert packed_cache.enabled([next(folder.glob("*.safetensors"))]) is False
