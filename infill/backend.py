"""Kept for older imports: the interface lives in `infill.models.base`, the project's own model in
`infill.models.native`, and loading any supported checkpoint in `infill.models.load`."""

from infill.models.base import CachingDenoiser, Denoiser
from infill.models.native import DEFAULT_MODEL_DIR, InfillBackend, load_backend

__all__ = ["CachingDenoiser", "DEFAULT_MODEL_DIR", "Denoiser", "InfillBackend", "load_backend"]
