"""Model families behind the engine's `Denoiser` interface, and `load`, which picks one.

    load(path)  path: a folder, or a name ORG/NAME[@REVISION] in the local Hugging Face cache
                (infill.models.hub_cache; nothing is downloaded); reads its config.json and
                dispatches on its `model_type` (`family_module`):
        "Dream"            -> infill.models.dream  (Dream-v0, Dream-Coder, DiffuCoder, DreamOn)
        "qwen2" + a mask token in its tokenizer files -> infill.models.dream (Open-dCoder)
        "llada"            -> infill.models.llada  (LLaDA-8B)
        "infill-diffusion" -> infill.models.native (this project's own model; path None: the
                              one shipped in the package)

Every family runs on the project's own implementation (`infill.models.decoder`). The Python files
published beside a checkpoint (its "remote code") are never imported, unless the caller opts in
with `trust_remote_code=True`: then the checkpoint's own modeling code computes the logits
(through transformers' AutoModel), under the same family conventions, without the context cache.

The modules, by role:
    loader          load, pick_device, pick_dtype, family_module, ... (imported on first use)
    base            the Denoiser interface every family implements
    native/         this project's own model; dream, llada: the published families; decoder:
                    their network; denoiser: the network behind the interface; remote: their own code
    vocabulary      checkpoints' tokenizers; defaults: each family's sampler settings
    weights         safetensors, tensor by tensor; quantize, int4: int8 and 4-bit weights;
                    packed_cache: a checkpoint's 4-bit network kept on disk for the next load
    hub_cache       names in the local Hugging Face cache; catalog: what `infill models` lists
    model_info      what a model folder is (its card for --version and the server), without torch

Importing the package imports no torch: `model_info` and `hub_cache` serve the language server's
start and `infill --version`; the names of `loader` are looked up there when first asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CachingDenoiser", "Denoiser", "SUPPORTED", "family_module", "load", "pick_device", "pick_dtype"]
LOADER_NAMES = {
    *__all__, "DTYPES", "cpu_has_bfloat16", "pick_native_dtype", "read_config", "resolve_model",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """`infill.models.load` (and the other names of `loader`), imported when first asked for."""
    if name in LOADER_NAMES:
        import infill.models.loader as loader

        return getattr(loader, name)
    raise AttributeError(f"module 'infill.models' has no attribute {name!r}")
