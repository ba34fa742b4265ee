"""infill: code infilling and editing with a masked-diffusion language model."""

__version__ = "0.1.0"
