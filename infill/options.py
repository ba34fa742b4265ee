"""What a request may ask of the engine: the sampler's settings, and each mode's options.

These dataclasses are the settings the CLI's flags and the language server's configuration
fill in; every value is checked when it is made (InputError), before a model is loaded.
torch-free, so the language server reads settings without loading torch.

    SamplerConfig   the denoise stage (infill.engine.sampler): steps, thresholds, unmasking rule, blocks
    InfillOptions   a request's window, budget and repair steps (infill.engine.repair), around a sampler
    FixOptions      fix mode's (infill.modes.fix): which tokens count as unlikely
    AuthorsSettings the published loops' arguments, for `protocol="authors"` (infill.engine.authors)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infill.errors import InputError

ORDERS = ("confidence", "margin", "left-to-right", "maskgit_plus", "topk_margin", "entropy", "low_confidence")
#   the unmasking rules (infill.engine.unmasking): this project's names first, then the published ones
LENGTH_POLICIES = ("first-pass", "free", "given")
PROTOCOLS = ("engine", "authors")  # this engine's sampler and stages, or each family's published loop
QUANTIZE_MODES = ("auto", "none", "int8", "int4")  # linear layers' weights (infill.models.quantize)
FAMILY_ORDERS = {  # the `alg` / `remasking` names each family's published loop knows, its default first
    "Dream": ("entropy", "maskgit_plus", "topk_margin", "origin"),
    "DreamOn": ("entropy", "maskgit_plus", "topk_margin"),
    "LLaDA": ("low_confidence", "random"),
    "Open-dCoder": ("p2", "entropy", "maskgit_plus", "topk_margin", "origin"),
}
AUTHORS_ORDERS = tuple(sorted({order for orders in FAMILY_ORDERS.values() for order in orders}))
ONE_LINE_STEPS = 16  # the default step cap of spans of one line or less (insertion points too)...
MULTI_LINE_STEPS = 128  # ...and of spans of several lines: at least one token a pass, more when confident
REVIEW_THRESHOLD = 5e-6
"""Review mode's default threshold (infill.modes.review: `infill review`'s, `--fix-threshold` to
change it; the language server's `reviewThreshold`; fix mode keeps FixOptions.threshold): a code
token is a finding below this probability, masked (and below FixOptions.ratio x its
favourite's). Chosen by `infill-bench review` (infill.bench.review) on the shipped model: of its
sweep, the threshold with at most 1 false finding per 100 clean lines and the best recall: 0.72
false findings per 100 clean lines, 4.3% of injected bugs found, 25% of findings on a bug
(2026-11-27, docs/measurements.md, "Reviewing: finding an injected bug"). Fix mode's 0.05 finds
60% of the bugs with 26.5 false findings per 100 clean lines; `--top 5` (ranking, no threshold)
puts the bug among the five least likely code tokens in 43% of windows."""


@dataclass
class SamplerConfig:
    steps: int | None = None  # cap on forward passes; None: by the spans (see step_cap)
    commit_threshold: float = 0.9  # commit every masked position at least this confident
    remask_threshold: float = 0.2  # a committed token whose probability falls below this is re-masked
    max_revisions: int = 2  # per position, so that sampling always converges
    length: str = "first-pass"  # how a span's length is decided: "first-pass", "free" (see below),
    #   or "given": every editable position is content, no <null> (e.g. re-denoising parts of a fill)
    length_scale: float = 1.0  # "first-pass": a span keeps this times the length the model decides
    #   (at least 1 position, at most its budget): fresh fills try other lengths
    #   (infill.engine.repair.fresh_fills)
    nulls_from_end: bool = True  # "free": <null> only at a span's end or before another null
    cache_refresh: int = 8  # a pass over the whole canvas every this many steps; between them
    #   only the span positions are computed, on cached context keys/values (1: never cache)
    temperature: float = 0.0  # 0: most likely token; > 0: sample (for alternatives)
    top_p: float | None = None  # sample only from the most likely tokens reaching this probability
    top_k: int | None = None  # ...and only from the k most likely
    seed: int | None = None
    order: str = "confidence"  # the unmasking rule: beyond the confident ones, a pass commits the
    #   masked positions whose token is most probable ("confidence" = LLaDA's "low_confidence";
    #   Dream's "maskgit_plus": under the sampling distribution), whose best token leads its
    #   runner-up most ("margin" = "topk_margin"), whose distribution is most peaked ("entropy"),
    #   or that come first in their span ("left-to-right": first on the canvas). infill.engine.unmasking
    block_length: int | None = None  # decode each span in blocks of this many positions, left to
    #   right, the step cap split between them (LLaDA, Fast-dLLM); None: the span is one block
    block_passes: bool = False  # with blocks and a cache: a cached pass computes only each row's
    #   current block and the positions the pass before changed, not the whole span (Fast-dLLM's
    #   dual cache computes the block alone); a pass then costs a block's positions
    expand_start: int = 4  # expand models (DreamOn): masks a span starts with (its budget is the
    #   most it may grow to); DreamOn's own evaluation starts at 4 (infill.engine.expansion)
    first_view: bool = False  # keep the first pass's log-probabilities (SampleResult.first_view):
    #   the recall stage ranks on them (the pipeline sets it for the fills it recalls for)
    cap_per_position: bool = False  # a step cap left unset is one pass per masked position (the
    #   Dream family's and LLaDA's authors set steps = new tokens), not ONE_LINE/MULTI_LINE_STEPS

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < 1:
            raise InputError(f"steps must be at least 1 (got {self.steps})")
        if self.temperature < 0:
            raise InputError(f"temperature must be 0 or more (got {self.temperature})")
        for name in ("commit_threshold", "remask_threshold"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"{name} must be between 0 and 1 (got {getattr(self, name)})")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise InputError(f"top_p must be above 0 and at most 1 (got {self.top_p})")
        for name in ("top_k", "block_length"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.block_passes and self.block_length is None:
            raise InputError("block_passes needs block_length (the blocks whose positions a pass computes)")
        if self.expand_start < 1:
            raise InputError(f"expand_start must be at least 1 (got {self.expand_start})")
        if self.order not in ORDERS:
            raise InputError(f"order must be one of {', '.join(ORDERS)} (got {self.order!r})")
        if self.length not in LENGTH_POLICIES:
            raise InputError(f"length must be one of {', '.join(LENGTH_POLICIES)} (got {self.length!r})")
        if self.length_scale <= 0:
            raise InputError(f"length_scale must be above 0 (got {self.length_scale})")
        if self.cache_refresh < 1:
            raise InputError(f"cache_refresh must be at least 1 (got {self.cache_refresh})")
        if self.max_revisions < 0:
            raise InputError(f"max_revisions must be 0 or more (got {self.max_revisions})")


@dataclass(frozen=True)
class AuthorsSettings:
    """The published loops' arguments as a user gives them (None: the loop's own default);
    infill.engine.authors runs them."""

    order: str | None = None  # Dream's `alg`, LLaDA's `remasking`; None: the family's first in FAMILY_ORDERS
    steps: int | None = None  # None: N (Dream, LLaDA), 128 (DreamOn's evaluation), 64 (Open-dCoder's)
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    block_length: int | None = None  # LLaDA: None: the whole hole is one block
    expand_start: int | None = None  # DreamOn: masks a hole starts with (its `min_gen_len`); None: 4
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.order is not None and self.order not in AUTHORS_ORDERS:
            raise InputError(f"order must be one of {', '.join(AUTHORS_ORDERS)} (got {self.order!r})")
        SamplerConfig(steps=self.steps, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                      block_length=self.block_length, expand_start=self.expand_start or 4)  # fmt: skip

    def check_family(self, family: str) -> None:
        """InputError for a setting this family's loop does not have."""
        if self.block_length is not None and family != "LLaDA":
            raise InputError(f"{family}'s published loop has no blocks (--block-length is LLaDA's)")
        if self.expand_start is not None and family != "DreamOn":
            raise InputError(f"{family}'s published loop does not grow holes (--expand-start is DreamOn's)")
        self.order_for(family)

    def order_for(self, family: str) -> str:
        """The order this family's loop runs: the one given, else the family's default."""
        orders = FAMILY_ORDERS[family]
        order = self.order or orders[0]
        if order not in orders:
            raise InputError(f"{family}'s published loop has no order {order!r} (it has {', '.join(orders)})")
        return order


@dataclass
class InfillOptions:
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    budget: int | None = None  # masked positions per span; None: from the span's current length
    context_length: int | None = None  # None: the model's own
    retries: int = 4  # retries of fills that break a file that parsed (infill.engine.repair.retries)
    token_edits: int = 6  # then single-token edits, each checked by the parser (engine.repair.token_edits)
    fresh_fills: int = 4  # then fresh fills, each with its own retries and edits (infill.engine.repair.
    #   fresh_fills), of spans of several lines only (single lines parse as often without them)
    pass_budget: int | None = 400  # the repair stage stops once a canvas has had this many forward
    #   passes in all (its retries, edits and fresh fills; bounds a broken fill's time: about 11 s
    #   at worst on two threads with the shipped model; None: no bound)
    recall: bool = True  # a one-line fill may take a line of the document the model ranks higher
    #   (infill.engine.recall; fill mode and the first inline sample, models with a <null> token)
    protocol: str = "engine"  # "authors": each family's published loop, nothing else (infill.engine.authors)
    authors: AuthorsSettings = field(default_factory=AuthorsSettings)  # its arguments

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise InputError(f"protocol must be one of {', '.join(PROTOCOLS)} (got {self.protocol!r})")
        if self.budget is not None and self.budget < 1:
            raise InputError(f"budget must be at least 1 (got {self.budget})")
        if self.context_length is not None and self.context_length < 8:
            raise InputError(f"context_length must be at least 8 (got {self.context_length})")
        for name in ("retries", "token_edits", "fresh_fills"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be 0 or more (got {getattr(self, name)})")
        if self.pass_budget is not None and self.pass_budget < 1:
            raise InputError(f"pass_budget must be at least 1 (got {self.pass_budget})")


@dataclass
class FixOptions:
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    threshold: float = 0.05  # flag a token whose probability is below this...
    ratio: float = 0.2  # ...and below this share of the probability of the model's favourite token
    #   (above 1 also flags the favourite itself when it is below `threshold`)
    max_fraction: float = 0.25  # flag at most this share of a span's tokens (at least one)
    scoring_rows: int = 8  # a model scored with each token masked: canvases per forward pass
    #   (infill.modes.fix.score_tokens; 8: a 7B model's pass over 2,048 tokens takes ~3 GiB more)
    context_length: int | None = None  # None: the model's own
    retries: int = 4  # syntax retries when the repaired span still has (or gets) syntax problems
    token_edits: int = 6  # then parser-checked single-token edits (infill.engine.repair.token_edits)
    #   (no fresh fills, InfillOptions.fresh_fills: a fix keeps the code it does not flag)
    pass_budget: int | None = InfillOptions.pass_budget  # the repair's passes, the fill's included

    def __post_init__(self) -> None:
        for name in ("threshold", "max_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"{name} must be between 0 and 1 (got {getattr(self, name)})")
        if self.ratio < 0:
            raise InputError(f"ratio must be 0 or more (got {self.ratio})")
        if self.scoring_rows < 1:
            raise InputError(f"scoring_rows must be at least 1 (got {self.scoring_rows})")
        InfillOptions(  # validates the options both have
            context_length=self.context_length,
            retries=self.retries,
            token_edits=self.token_edits,
            pass_budget=self.pass_budget,
        )

    @classmethod
    def from_infill(cls, options: InfillOptions, **overrides) -> FixOptions:
        """The fix options of a request made with infill `options`: the same sampler, window,
        retries, token edits and pass budget (`overrides`: the fields only fix has, e.g.
        `threshold`)."""
        return cls(
            options.sampler,
            context_length=options.context_length,
            retries=options.retries,
            token_edits=options.token_edits,
            pass_budget=options.pass_budget,
            **overrides,
        )


REQUEST_OPTIONS = {  # camelCase name: (the options it sets, its field, the JSON type it takes)
    "steps": ("sampler", "steps", int),
    "temperature": ("sampler", "temperature", float),
    "topP": ("sampler", "top_p", float),
    "topK": ("sampler", "top_k", int),
    "order": ("sampler", "order", str),
    "length": ("sampler", "length", str),
    "blockLength": ("sampler", "block_length", int),
    "blockPasses": ("sampler", "block_passes", bool),
    "expandStart": ("sampler", "expand_start", int),
    "commitThreshold": ("sampler", "commit_threshold", float),
    "remaskThreshold": ("sampler", "remask_threshold", float),
    "cacheRefresh": ("sampler", "cache_refresh", int),
    "seed": ("sampler", "seed", int),
    "budget": ("infill", "budget", int),
    "contextLength": ("infill", "context_length", int),
    "retries": ("infill", "retries", int),
    "tokenEdits": ("infill", "token_edits", int),
    "freshFills": ("infill", "fresh_fills", int),
    "passBudget": ("infill", "pass_budget", int),  # 0: no bound (as --pass-budget 0)
    "recall": ("infill", "recall", bool),
    "fixThreshold": ("fix", "threshold", float),  # --fix-threshold
}
"""The options a request to a team server may set (`POST /v1/infill`'s "options"), each under the
camelCase of its field here and of its `infill` flag, as the language server's settings are:
team_server.protocols reads them, infill.models.served writes them."""


def options_json(options: InfillOptions | FixOptions) -> dict:
    """`options` under REQUEST_OPTIONS' names: every field it has that is set (not None), so that
    the server runs what the client would have run (a pass budget of None, no bound, as 0)."""
    values: dict = {}
    for key, (where, name, _) in REQUEST_OPTIONS.items():
        holder = options.sampler if where == "sampler" else options
        if where == "fix" and not isinstance(options, FixOptions):
            continue
        if not hasattr(holder, name):  # fix options have no budget, fresh fills or recall
            continue
        value = getattr(holder, name)
        if name == "pass_budget" and value is None:
            value = 0
        if value is not None:
            values[key] = value
    return values
