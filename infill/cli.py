"""`infill`: regenerate spans of a source file with the diffusion model; print a diff.

    infill file.py --lines 10-20                 # unified diff on stdout
    infill file.py --node body:parse --write     # apply in place (atomic)
    infill file.py --range 3:5-3:20 --json       # the edits as JSON
    infill file.py --lines 7 --show-steps        # watch the canvas denoise, step by step
    infill file.py --lines 10-20 --fix           # re-predict only the tokens the model doubts
    infill file.py --document                    # docstrings for functions/classes lacking one
    infill file.py --lines 7 --alternatives 4    # 4 candidates for the span, best first
    infill file.py --lines 10-20 --model ~/models/DiffuCoder-7B-Instruct --device cuda
                                                 # a published model (Dream, LLaDA, ...: docs/models.md)
    infill file.py --lines 7 --model apple/DiffuCoder-7B-Instruct
                                                 # by name, from the local Hugging Face cache
    infill models [FOLDER ...]                   # the models found in the cache and FOLDERs
                                                 # (a file named "models": write ./models)
    infill serve [--model M] [--port 8000] ...   # one model for a team, over HTTP, on Ray Serve
                                                 # (`infill serve --help`; docs/serving.md)
    infill file.py --lines 7 --server http://gpu-box:8000
                                                 # the team server's model fills it (INFILL_TOKEN)
    infill app.ts --node body:greet              # JavaScript, TypeScript, Go, Rust, Java, C, C++ too
                                                 # (by extension, or --language; others: as text)

Exit codes: 0 success (whether or not the model changed anything), 2 bad input (nothing
changed), 3 the model could not be loaded or run, 124 --timeout passed with no fill to keep
(--protocol authors), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from infill import __version__
from infill.engine.pipeline import Canvas, Hooks, RequestStats, Step, run
from infill.errors import InputError, ModelError, TimedOut
from infill.models import load
from infill.models.defaults import PUBLISHED_PASS_BUDGET, TUNABLE, recommended_pass_budget, with_recommended
from infill.models.model_info import language_notice, model_card
from infill.models.served import TeamServer
from infill.modes import (
    AlternativesRequest,
    Candidate,
    DocstringRequest,
    DocstringResult,
    FillRequest,
    FixRequest,
    ReviewRequest,
)
from infill.modes.alternatives import MAX_CANDIDATES
from infill.modes.reports import candidates_report, docstring_report, fix_report, json_report, review_report
from infill.modes.review import REVIEW_THRESHOLD
from infill.options import (
    AUTHORS_ORDERS,
    LENGTH_POLICIES,
    MULTI_LINE_STEPS,
    ONE_LINE_STEPS,
    ORDERS,
    PROTOCOLS,
    QUANTIZE_MODES,
    AuthorsSettings,
    FixOptions,
    InfillOptions,
    SamplerConfig,
)
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import Document, load_document, write_atomic
from infill.text.edits import TextEdit, apply_edits, unified_diff
from infill.text.languages import LANGUAGES, PYTHON, Language, detect
from infill.text.spans import Span, node_span, parse_lines, parse_range, validate_spans

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT, EXIT_MODEL, EXIT_TIMED_OUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 124, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", type=Path, nargs="?", help="the source file to edit")
    parser.add_argument("--language", default=None, metavar="NAME",
                        help="the file's language (default: from its extension): "
                        f"{', '.join(language.name for language in LANGUAGES)}, or text (any other "
                        "language is filled as text: lines and ranges, no node selectors or syntax checks)")
    parser.add_argument("--version", action="store_true",
                        help="print infill's version and which model it runs (with --model: that one): "
                        "name, size, training data, origin")  # fmt: skip
    what = parser.add_argument_group("what to regenerate (repeatable, combinable)")
    what.add_argument("--lines", action="append", default=[], metavar="A-B",
                      help="lines A to B, 1-based, inclusive (or a single line A)")
    what.add_argument("--range", action="append", default=[], metavar="L:C-L:C",
                      help="from line:column to line:column, 1-based, end column exclusive")
    what.add_argument("--node", action="append", default=[], metavar="KIND:TARGET",
                      help="a tree-sitter node: function:NAME, class:NAME, body:NAME, "
                      "docstring:NAME (NAME may be dotted, Cls.meth, or NAME@LINE), statement:LINE")
    how = parser.add_argument_group("mode (default: regenerate the spans)").add_mutually_exclusive_group()
    how.add_argument("--fix", action="store_true",
                     help="repair the spans: re-predict only the tokens the model finds unlikely")
    how.add_argument("--document", action="store_true",
                     help="write docstrings (other languages: documentation comments, JSDoc, Javadoc, "
                     "Doxygen, rustdoc, Go doc comments) for the functions and classes that lack one "
                     "(all of them, or those whose header the spans select)")
    how.add_argument("--review", action="store_true",
                     help="list the code tokens the model finds unlikely (each scored with it masked), "
                     "whole file or the spans; nothing is written; exit 1 when there are findings "
                     "(also: infill review FILE)")
    how.add_argument("--alternatives", type=int, default=None, metavar="N",
                     help="sample N candidates for one span in one batch; print each with its score")
    sampler = parser.add_argument_group("sampling")
    sampler.add_argument("--protocol", choices=PROTOCOLS, default="engine",
                         help="engine: this engine's sampler with its repair and recall stages (default); "
                         "authors: a published model's own loop, token for token as its authors' code "
                         "(one hole per span of --budget masks; only --steps, --order, --temperature, "
                         "--top-p, --top-k, --block-length (LLaDA), --expand-start (DreamOn) and --seed "
                         "apply; docs/models.md)")
    sampler.add_argument("--steps", type=int, default=None,
                         help=f"cap on denoising steps (forward passes); default {ONE_LINE_STEPS} for spans "
                         f"of one line or less, {MULTI_LINE_STEPS} for longer ones")
    sampler.add_argument("--context-length", type=int, default=None, metavar="N",
                         help="the model's window in tokens around the spans (default: the model's own; "
                         "a published model's: 512 on the CPU, 2048 on a GPU)")
    sampler.add_argument("--budget", type=int, default=None,
                         help="masked positions per span (default: from the span's current length)")
    sampler.add_argument("--length", choices=LENGTH_POLICIES, default=SamplerConfig.length,
                         help="how a span's length is decided: once, from the first pass (default), "
                         "free (nulls grow from the span's end), or given (the budget is the length)")
    sampler.add_argument("--order", choices=sorted(set(ORDERS) | set(AUTHORS_ORDERS)), default=None,
                         help="the unmasking rule: which masked positions a step commits first, beyond "
                         "those above the commit threshold: most probable token (confidence = "
                         "low_confidence, default; maskgit_plus: after temperature/top-p), widest margin "
                         "over the runner-up (margin = topk_margin), most peaked distribution (entropy), "
                         "or first in the file (left-to-right); see docs/sampler.md. --protocol authors: "
                         "the family's published names (Dream: entropy, maskgit_plus, topk_margin, origin; "
                         "LLaDA: low_confidence, random; Open-dCoder: p2 and Dream's)")
    sampler.add_argument("--block-length", type=int, default=None, metavar="N",
                         help="decode each span in blocks of N positions, left to right, the step cap "
                         "split between them (LLaDA, Fast-dLLM; default: one block)")
    sampler.add_argument("--block-passes", action="store_true",
                         help="with --block-length: a cached pass computes only the current block (and "
                         "what the pass before changed), not the whole span: a pass costs a block")
    sampler.add_argument("--top-p", type=float, default=None, metavar="P",
                         help="sample only from the most likely tokens that reach probability P")
    sampler.add_argument("--top-k", type=int, default=None, metavar="K",
                         help="sample only from the K most likely tokens")
    sampler.add_argument("--expand-start", type=int, default=None, metavar="N",
                         help="models with an <|expand|> token (DreamOn): masks a span starts from; it "
                         f"grows up to its budget (default: the model's recommendation, else "
                         f"{SamplerConfig.expand_start})")
    sampler.add_argument("--commit-threshold", type=float, default=SamplerConfig.commit_threshold)
    sampler.add_argument("--remask-threshold", type=float, default=SamplerConfig.remask_threshold)
    sampler.add_argument("--cache-refresh", type=int, default=SamplerConfig.cache_refresh, metavar="N",
                         help="a pass over the whole file window every N steps; the steps between "
                         "compute only the spans, on cached context (1: every pass exact)")
    sampler.add_argument("--temperature", type=float, default=None,
                         help="0 picks the most likely token (default; 0.8 with --alternatives)")
    sampler.add_argument("--retries", type=int, default=InfillOptions.retries, metavar="N",
                         help="when a fill breaks the file's syntax, re-mask the tokens the syntax errors "
                         "touch and denoise them again, up to N times (0: never; default %(default)s)")
    sampler.add_argument("--token-edits", type=int, default=InfillOptions.token_edits, metavar="N",
                         help="then try single-token edits of a fill that still breaks the syntax, each "
                         "checked by the parser, and keep up to N that mend it (0: never; default "
                         "%(default)s)")
    sampler.add_argument("--fresh-fills", type=int, default=InfillOptions.fresh_fills, metavar="N",
                         help="then fill a span of several lines that still breaks the syntax afresh (with "
                         "its own retries and edits) up to N times, keeping the fill with fewest syntax "
                         "errors (0: never; default %(default)s)")
    sampler.add_argument("--pass-budget", type=int, default=None, metavar="N",
                         help="forward passes of the model a fill and its repair steps (retries, edits, "
                         "fresh fills) take in all, with --fix too (after its scoring passes); bounds the "
                         "time a broken fill takes; 0: no bound; "
                         f"default {InfillOptions.pass_budget}, {PUBLISHED_PASS_BUDGET} with a published "
                         "model)")
    add_renamed_flags(sampler)
    sampler.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                         help="a wall-clock deadline for the model's work: past it a fill ends at its next "
                         "pass and skips the repair and recall stages (the best fill so far); under "
                         "--protocol authors nothing is kept and the exit code is 124")
    sampler.add_argument("--no-recall", dest="recall", action="store_false",
                         help="never let a one-line fill take a line of the file the model ranks higher "
                         "than its own fill (infill.engine.recall)")
    sampler.add_argument("--seed", type=int, default=None)
    sampler.add_argument("--fix-threshold", type=float, default=None, metavar="P",
                         help="--fix and --review flag tokens whose probability is below P "
                         f"(default {FixOptions.threshold} for --fix, {REVIEW_THRESHOLD} for --review: "
                         "infill-bench review's choice)")
    sampler.add_argument("--top", type=int, default=None, metavar="K",
                         help="--review: the K code tokens the model doubts most, whatever the "
                         "threshold, most doubted first (surprise beyond the model's expected surprise)")
    model = parser.add_argument_group("model")
    model.add_argument("--model", default=None, metavar="DIR|ORG/NAME[@REV]",
                       help="checkpoint folder, or a model's name found in the local Hugging Face cache "
                       "(never downloaded; `infill models` lists them): Dream, Dream-Coder, DiffuCoder, "
                       "DreamOn, LLaDA, Open-dCoder or infill's own (default: the model shipped with infill; "
                       "see docs/models.md)")
    model.add_argument("--device", default="auto", help="cuda, mps, cpu or auto (default: the first of "
                       "those available)")
    model.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                       help="weights' precision (auto: bfloat16 on a GPU; on the CPU float32, and "
                            "bfloat16 for infill's own model where the CPU computes it natively)")
    model.add_argument("--trust-remote-code", action="store_true",
                       help="run the modeling code shipped beside the checkpoint instead of infill's own "
                       "implementation (it is never run without this flag)")
    model.add_argument("--quantize", choices=QUANTIZE_MODES, default="auto",
                       help="int4: the linear layers' weights in 4 bits with group-wise scales (CPU); "
                       "int8: in 8 bits (CPU and float32 only); none: as stored; auto (default): for "
                       "models of 100M parameters or more on the CPU, int8 where it fits in half the memory, "
                       "else int4 "
                       "(quality and speed: docs/models.md)")
    model.add_argument("--threads", type=int, default=None, help="CPU threads for the model")
    model.add_argument("--server", default=None, metavar="URL",
                       help="send the request to a team server (`infill serve`: docs/serving.md) instead of "
                       "loading a model; the file is read, its spans found and the edits applied here")
    model.add_argument("--token-file", type=Path, default=None, metavar="FILE",
                       help="--server: the bearer token the server gave you, read from FILE "
                       "(default: the environment variable INFILL_TOKEN)")  # fmt: skip
    out = parser.add_argument_group("output")
    mode = out.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="apply the edits to the file (atomic)")
    mode.add_argument("--json", action="store_true", help="print the edits and stats as JSON")
    out.add_argument("--show-steps", action="store_true",
                     help="print the masked spans after every denoising step (to stderr)")
    out.add_argument("--stats", action="store_true", help="print sampling statistics to stderr")
    return parser


RENAMED_FLAGS = {  # old name: the flag's name now, that of its setting in every layer (issue 30)
    "--syntax-rounds": "--retries",
    "--syntax-edits": "--token-edits",
    "--syntax-restarts": "--fresh-fills",
}


class RenamedFlag(argparse.Action):
    """An old name of a flag: still works, says on stderr which flag to use instead."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        new = RENAMED_FLAGS[option_string]
        print(f"{parser.prog}: warning: {option_string} is deprecated, use {new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_flags(group) -> None:
    """The old flags, hidden from --help, each setting its new flag's value. Added after the new
    flags, and with no default of their own, so that `parser.get_default` still reads the new
    flag's default (argparse answers with the first action of a dest)."""
    for old, new in RENAMED_FLAGS.items():
        group.add_argument(old, dest=new[2:].replace("-", "_"), type=int, action=RenamedFlag,
                           default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # fmt: skip


def parse_spans(text: str, args: argparse.Namespace, required: bool = True,
                language: Language = PYTHON) -> list[Span]:  # fmt: skip
    spans = [parse_lines(text, spec) for spec in args.lines]
    spans += [parse_range(text, spec) for spec in args.range]
    spans += [node_span(text, spec, language) for spec in args.node]
    if not spans and required:
        raise InputError("say what to regenerate: --lines, --range or --node")
    return validate_spans(text, spans)


def explicit_sampler_fields(args: argparse.Namespace) -> set[str]:
    """The sampler fields a model's recommendation may set that the user set on the command line."""
    return {name for name in TUNABLE if getattr(args, name, None) is not None}


ENGINE_ONLY = ("length", "block_passes", "commit_threshold", "remask_threshold", "cache_refresh", "retries",
               "token_edits", "fresh_fills", "pass_budget", "recall")  # fmt: skip


def authors_settings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> AuthorsSettings:
    """--protocol authors: the published loop's arguments from the flags; InputError for a flag
    only this engine's protocol has (or a mode other than filling)."""
    given = [name for name in ENGINE_ONLY if getattr(args, name) != parser.get_default(name)]
    if given:
        flags = ", ".join("--" + ("no-recall" if n == "recall" else n.replace("_", "-")) for n in given)
        raise InputError(f"--protocol authors runs the authors' loop alone: {flags} belong to this engine's")
    if args.fix or args.document or args.alternatives is not None:
        raise InputError(
            "--protocol authors fills spans: --fix, --document and --alternatives are this engine's"
        )
    if args.model is None:
        raise InputError("--protocol authors needs a published model (--model; docs/models.md): "
                         "the shipped model has no authors' loop")  # fmt: skip
    return AuthorsSettings(order=args.order, steps=args.steps, temperature=args.temperature or 0.0,
                           top_p=args.top_p, top_k=args.top_k, block_length=args.block_length,
                           expand_start=args.expand_start, seed=args.seed)  # fmt: skip


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.timeout is not None and not args.timeout > 0:
        raise InputError(f"--timeout must be above 0 seconds (got {args.timeout})")
    authors = authors_settings(args, parser) if args.protocol == "authors" else AuthorsSettings()
    if args.protocol == "engine" and args.order is not None and args.order not in ORDERS:
        raise InputError(f"--order {args.order} is a published loop's (--protocol authors)")
    temperature = args.temperature if args.temperature is not None else SamplerConfig.temperature
    options = InfillOptions(  # validates the numbers before anything is loaded
        sampler=SamplerConfig(
            steps=args.steps,
            length=args.length,
            order=args.order if args.order in ORDERS else SamplerConfig.order,
            block_length=args.block_length,
            block_passes=args.block_passes,
            top_p=args.top_p,
            top_k=args.top_k,
            expand_start=args.expand_start if args.expand_start is not None else SamplerConfig.expand_start,
            commit_threshold=args.commit_threshold,
            remask_threshold=args.remask_threshold,
            cache_refresh=args.cache_refresh,
            temperature=temperature,
            seed=args.seed,
        ),
        budget=args.budget,
        context_length=args.context_length,
        retries=args.retries,
        token_edits=args.token_edits,
        fresh_fills=args.fresh_fills,
        pass_budget=InfillOptions.pass_budget if args.pass_budget is None else args.pass_budget or None,
        recall=args.recall,
        protocol=args.protocol,
        authors=authors,
    )
    threshold = args.fix_threshold
    if threshold is None:
        threshold = REVIEW_THRESHOLD if args.review else FixOptions.threshold
    FixOptions.from_infill(options, threshold=threshold)  # validated before loading
    if args.alternatives is not None:
        if args.write:
            raise InputError("--alternatives prints candidates to choose from; it cannot --write")
        if not 1 <= args.alternatives <= MAX_CANDIDATES:
            raise InputError(f"--alternatives takes a number from 1 to {MAX_CANDIDATES}")
    if args.top is not None and not args.review:
        raise InputError("--top ranks the tokens of a review (--review)")
    document = read_document(args.file, args.language)
    required = not (args.document or args.review)
    spans = parse_spans(document.text, args, required=required, language=document.language)
    if args.alternatives is not None and len(spans) != 1:
        raise InputError(f"--alternatives takes exactly one span (got {len(spans)})")
    if args.document and not document.language.has_grammar:
        raise InputError("--document needs a language with a grammar (say its language with --language)")
    if args.document:
        sites = missing_docstrings(document.text, within=spans or None, language=document.language)
        if not sites:
            where = "the selected code" if spans else "the file"
            print(f"infill: every function and class in {where} has a {document.language.doc_noun}",
                  file=sys.stderr)  # fmt: skip
            empty = DocstringResult([], RequestStats(0, 0, 0, 0, 0.0, converged=True))
            output(document, [], docstring_report(document, empty), args)
            return EXIT_OK
    if args.server is not None:
        backend = served_model(args, parser)
    else:
        backend = load(args.model, args.device, args.dtype, threads=args.threads,
                       trust_remote_code=args.trust_remote_code, quantize=args.quantize)  # fmt: skip
    notice = language_notice(document.language, args.model)
    if notice:
        print(f"infill: {notice}", file=sys.stderr)
    # The family's recommended sampler settings (Dream: entropy order, temperature 0.2, ...) fill
    # in what the user left unset: infill.models.defaults. (Not under the authors' protocol: only
    # the flags given apply there.)
    if args.protocol == "engine":
        recommended = with_recommended(options.sampler, backend, explicit_sampler_fields(args))
        options = replace(options, sampler=recommended)
        if args.pass_budget is None:
            options = replace(options, pass_budget=recommended_pass_budget(backend, options.pass_budget))
    fix_options = FixOptions.from_infill(options, threshold=threshold)
    deadline = time.monotonic() + args.timeout if args.timeout is not None else None
    hooks = Hooks(on_step=StepPrinter(backend) if args.show_steps else None, deadline=deadline)

    if args.alternatives is not None:
        request = AlternativesRequest(document, spans[0], args.alternatives, options, args.temperature)
        candidates = run(backend, request, hooks)
        print_candidates(document, candidates, args)
        if args.stats or args.show_steps:
            summary = f"{len(candidates)} distinct candidate(s)"
            print(stats_line(candidates[0].stats, summary), file=sys.stderr)
        return EXIT_OK
    if args.review:
        return review(backend, document, spans, fix_options, args, hooks)
    if args.fix:
        result = run(backend, FixRequest(document, spans, fix_options), hooks)
        report, summary = fix_report(document, result), f"{len(result.flagged)} token(s) flagged"
    elif args.document:
        result = run(backend, DocstringRequest(document, sites, options), hooks)
        summary = f"{len(result.edits)} {document.language.doc_noun}(s)"
        report = docstring_report(document, result)
    else:
        result = run(backend, FillRequest(document, spans, options), hooks)
        report, summary = json_report(document, result), f"{len(result.spans)} span(s)"
    output(document, result.edits, report, args)
    if args.stats or args.show_steps:
        print(stats_line(result.stats, summary), file=sys.stderr)
    return EXIT_OK


LOCAL_ONLY = ("model", "device", "dtype", "quantize", "threads", "trust_remote_code", "show_steps")


def served_model(args: argparse.Namespace, parser: argparse.ArgumentParser) -> TeamServer:
    """--server: the team server in the model's place (infill.models.served), after checking that
    no flag asks for what only a model in this process does."""
    given = [name for name in LOCAL_ONLY if getattr(args, name) != parser.get_default(name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InputError(f"--server runs the team server's model: {flags} belong to a model run here")
    token = os.environ.get("INFILL_TOKEN")
    if args.token_file is not None:
        try:
            token = args.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"cannot read the token file {args.token_file}: {error}") from None
    return TeamServer.connect(args.server, token)


def review(backend, document: Document, spans: list, options: FixOptions, args, hooks: Hooks) -> int:
    """--review: the findings as lines FILE:LINE:COLUMN: ... (or --json); exit 1 when there are any."""
    result = run(backend, ReviewRequest(document, spans, options, args.top), hooks)
    if args.json:
        print(json.dumps(review_report(result), indent=1, ensure_ascii=False))
    for f in [] if args.json else result.findings:
        where = f"{args.file}:{f.line}:{f.column}"
        print(f"{where}: `{f.text}`: infill expected `{f.expected}` (p={f.score:.4f})")
    if args.stats:
        print(stats_line(result.stats, f"{len(result.findings)} finding(s)"), file=sys.stderr)
    return EXIT_FINDINGS if result.findings else EXIT_OK


def read_document(path: Path, language: str | None) -> Document:
    """The file, in the language ``--language`` names or its extension tells (infill.text.languages);
    what to say about that language (filled as text, say) is said here, once."""
    document = load_document(path)
    first_line = document.text.split("\n", 1)[0] if document.text.startswith("#!") else ""
    detected = detect(language, path, first_line)
    if detected.notice:
        print(f"infill: {detected.notice}", file=sys.stderr)
    return replace(document, language=detected.language)


def output(document: Document, edits: list[TextEdit], report: dict, args: argparse.Namespace) -> None:
    """The edits as a diff on stdout, applied in place (--write), or the report as JSON (--json)."""
    new_text = apply_edits(document.text, edits)
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    elif args.write:
        if new_text != document.text:
            write_atomic(args.file, document.encode(new_text))
    elif new_text == document.text:
        print("infill: no change (the model wrote the span as it is)", file=sys.stderr)
    else:
        sys.stdout.write(unified_diff(document.text, new_text, str(args.file)))


def print_candidates(document: Document, candidates: list[Candidate], args: argparse.Namespace) -> None:
    """Each candidate with its score (mean log-probability): a diff each, or a JSON list."""
    if args.json:
        print(json.dumps(candidates_report(document, candidates), indent=1, ensure_ascii=False))
        return
    for rank, c in enumerate(candidates, 1):
        broken = ", leaves a syntax error" if c.breaks_syntax else ""
        print(f"# candidate {rank} of {len(candidates)}: score {c.score:.4f} (mean log-probability){broken}")
        new_text = apply_edits(document.text, [c.edit] if c.edit else [])
        sys.stdout.write(unified_diff(document.text, new_text, str(args.file)) or "# (the span as it is)\n")


def stats_line(s: RequestStats, summary: str) -> str:
    how = "converged" if s.converged else "stopped at the step cap"
    repair = ""
    if s.repair_passes:
        repair = f" (repair: {s.repair_passes} passes, {s.repair_seconds * 1000:.0f} ms)"
    computed = f" computing {s.computed} positions" if s.computed else ""  # block passes cut them
    return (f"infill: {summary}, {s.tokens} positions, {s.steps} steps "
            f"({s.forward_passes} forward passes{computed}, {s.revisions} revisions"
            f"{f', syntax retries: {s.retries}' if s.retries else ''}"
            f"{f', token edits: {s.token_edits}' if s.token_edits else ''}"
            f"{f', fresh fills: {s.fresh_fills}' if s.fresh_fills else ''}"
            f"{f', lines recalled: {s.recalled}' if s.recalled else ''}), "
            f"{s.seconds * 1000:.0f} ms{repair}, {how}")


class StepPrinter:
    """--show-steps: the masked region(s) after each step; new tokens bold, re-masked ones red."""

    MASK, NULL = "░", "·"

    def __init__(self, backend, stream=sys.stderr):
        self.backend, self.stream = backend, stream
        self.color = stream.isatty()

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def __call__(self, canvas: Canvas, step: Step) -> None:
        ids, committed, remasked = step.ids[0], step.committed[0], step.remasked[0]
        retry = f"fresh fill {step.restart}, " if step.restart else ""
        retry += f"syntax retry {step.retry}, " if step.retry else ""
        header = (f"--- {retry}step {step.index + 1}: +{int(committed.sum())} committed, "
                  f"{int(remasked.sum())} re-masked, {step.masked_left} masked left")
        print(header, file=self.stream)
        for slot in canvas.slots:
            pieces = []
            for i in range(slot.start, slot.start + slot.length):
                token = int(ids[i])
                if remasked[i]:
                    pieces.append(self.paint("▓", "31"))
                elif token == self.backend.mask_id:
                    pieces.append(self.MASK)
                elif token == self.backend.null_id:
                    pieces.append(self.paint(self.NULL, "2"))
                else:
                    text = self.backend.token_text(token)
                    pieces.append(self.paint(text, "1;32") if committed[i] else text)
            print("".join(pieces), file=self.stream)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["review"] and len(argv) > 1:  # `infill review FILE ...`: infill FILE ... --review
        argv = [*argv[1:], "--review"]
    if argv[:1] == ["models"]:  # `infill models ...`; a file named "models" is ./models
        from infill.models.catalog import models_command

        return models_command(argv[1:])
    if argv[:1] == ["serve"]:  # `infill serve ...`: the team server on Ray Serve (docs/serving.md)
        from team_server.cli import serve_command

        return serve_command(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"infill {__version__}")
        print(model_card(args.model).describe())
        return 0
    if args.file is None:
        parser.error("the following arguments are required: file")
    try:
        return run_command(args, parser)
    except InputError as error:
        print(f"infill: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    except ModelError as error:
        print(f"infill: model error: {error}", file=sys.stderr)
        return EXIT_MODEL
    except TimedOut as error:
        print(f"infill: timed out: {error}; nothing was written", file=sys.stderr)
        return EXIT_TIMED_OUT
    except KeyboardInterrupt:
        print("infill: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
