"""The modes: what a request asks for, as a plan over the pipeline's stages (infill.engine.pipeline).

Each mode is one module with a request dataclass (its `plan` and its `finish`) and the result
it returns; `infill.engine.pipeline.run(denoiser, request)` runs any of them:

    fill          FillRequest           regenerate spans                       -> InfillResult
    fix           FixRequest            re-predict the tokens the model doubts -> FixResult
    docstrings    DocstringRequest      write missing docstrings               -> DocstringResult
    alternatives  AlternativesRequest   n candidates for one span, ranked      -> list[Candidate]
    inline        InlineRequest         ghost text at the cursor               -> Completions
    review        ReviewRequest         the code tokens the model doubts       -> ReviewResult

A mode plans its jobs on the whole file and finishes on the whole file: the pipeline stages each
job on the window of the file the model can reach (infill.engine.pipeline.in_window) and hands
the filled canvases back in the file's offsets. A new mode: a module here with its request; the
stages stay as they are. `reports` turns each mode's result into the JSON that `infill --json`
prints and a team server's /v1/infill answers (team_server).
"""

from infill.modes.alternatives import AlternativesRequest, Candidate
from infill.modes.docstrings import DocstringRequest, DocstringResult
from infill.modes.fill import FillRequest, InfillResult
from infill.modes.fix import FixRequest, FixResult
from infill.modes.inline import Completions, InlineRequest
from infill.modes.review import ReviewRequest, ReviewResult

__all__ = [
    "AlternativesRequest",
    "Candidate",
    "Completions",
    "DocstringRequest",
    "DocstringResult",
    "FillRequest",
    "FixRequest",
    "FixResult",
    "InfillResult",
    "InlineRequest",
    "ReviewRequest",
    "ReviewResult",
]
