"""`infill`: regenerate spans of a Python file with the diffusion model; print a diff.

    infill file.py --lines 10-20                 # unified diff on stdout
    infill file.py --node body:parse --write     # apply in place (atomic)
    infill file.py --range 3:5-3:20 --json       # the edits as JSON
    infill file.py --lines 7 --show-steps        # watch the canvas denoise, step by step

Exit codes: 0 success (whether or not the model changed anything), 2 bad input (nothing
changed), 3 the model could not be loaded or run, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from infill.backend import load_backend
from infill.canvas import Canvas
from infill.document import Document, load_document, write_atomic
from infill.edits import apply_edits, edits_to_json, unified_diff
from infill.engine import InfillOptions, InfillResult, infill
from infill.errors import InputError, ModelError
from infill.sampler import SamplerConfig, Step
from infill.spans import Span, node_span, parse_lines, parse_range, validate_spans

EXIT_OK, EXIT_INPUT, EXIT_MODEL, EXIT_INTERRUPTED = 0, 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", type=Path, help="the Python file to edit")
    what = parser.add_argument_group("what to regenerate (repeatable, combinable)")
    what.add_argument("--lines", action="append", default=[], metavar="A-B",
                      help="lines A to B, 1-based, inclusive (or a single line A)")
    what.add_argument("--range", action="append", default=[], metavar="L:C-L:C",
                      help="from line:column to line:column, 1-based, end column exclusive")
    what.add_argument("--node", action="append", default=[], metavar="KIND:TARGET",
                      help="a tree-sitter node: function:NAME, class:NAME, body:NAME, "
                      "docstring:NAME (NAME may be dotted, Cls.meth, or NAME@LINE), statement:LINE")
    sampler = parser.add_argument_group("sampling")
    sampler.add_argument("--steps", type=int, default=SamplerConfig.steps,
                         help="cap on denoising steps (forward passes); default %(default)s")
    sampler.add_argument("--budget", type=int, default=None,
                         help="masked positions per span (default: from the span's current length)")
    sampler.add_argument("--commit-threshold", type=float, default=SamplerConfig.commit_threshold)
    sampler.add_argument("--remask-threshold", type=float, default=SamplerConfig.remask_threshold)
    sampler.add_argument("--temperature", type=float, default=SamplerConfig.temperature)
    sampler.add_argument("--seed", type=int, default=None)
    sampler.add_argument("--model", type=Path, default=None,
                         help="model directory (default: the model shipped with infill)")
    sampler.add_argument("--threads", type=int, default=None, help="CPU threads for the model")
    out = parser.add_argument_group("output")
    mode = out.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="apply the edits to the file (atomic)")
    mode.add_argument("--json", action="store_true", help="print the edits and stats as JSON")
    out.add_argument("--show-steps", action="store_true",
                     help="print the masked spans after every denoising step (to stderr)")
    out.add_argument("--stats", action="store_true", help="print sampling statistics to stderr")
    return parser


def parse_spans(text: str, args: argparse.Namespace) -> list[Span]:
    spans = [parse_lines(text, spec) for spec in args.lines]
    spans += [parse_range(text, spec) for spec in args.range]
    spans += [node_span(text, spec) for spec in args.node]
    if not spans:
        raise InputError("say what to regenerate: --lines, --range or --node")
    return validate_spans(text, spans)


def run(args: argparse.Namespace) -> int:
    options = InfillOptions(  # validates the numbers before anything is loaded
        sampler=SamplerConfig(
            steps=args.steps,
            commit_threshold=args.commit_threshold,
            remask_threshold=args.remask_threshold,
            temperature=args.temperature,
            seed=args.seed,
        ),
        budget=args.budget,
    )
    document = load_document(args.file)
    spans = parse_spans(document.text, args)
    backend = load_backend(args.model, threads=args.threads)
    show = StepPrinter(backend) if args.show_steps else None
    result = infill(backend, document, spans, options, on_step=show)
    new_text = apply_edits(document.text, result.edits)
    if args.json:
        print(json.dumps(json_report(document, result), indent=1, ensure_ascii=False))
    elif args.write:
        if new_text != document.text:
            write_atomic(args.file, document.encode(new_text))
    else:
        sys.stdout.write(unified_diff(document.text, new_text, str(args.file)))
    if args.stats or args.show_steps:
        print(stats_line(result), file=sys.stderr)
    return EXIT_OK


def json_report(document: Document, result: InfillResult) -> dict:
    stats = result.stats
    return {
        "edits": edits_to_json(document.text, result.edits),
        "spans": [{"label": s.span.label, "start": s.span.start, "end": s.span.end,
                   "new_text": s.new_text, "changed": s.edit is not None} for s in result.spans],
        "stats": stats.__dict__,
    }


def stats_line(result: InfillResult) -> str:
    s = result.stats
    how = "converged" if s.converged else "stopped at the step cap"
    return (f"infill: {len(result.spans)} span(s), {s.tokens} positions, {s.steps} steps "
            f"({s.forward_passes} forward passes, {s.revisions} revisions), "
            f"{s.seconds * 1000:.0f} ms, {how}")


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
        header = (f"--- step {step.index + 1}: +{int(committed.sum())} committed, "
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
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except InputError as error:
        print(f"infill: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    except ModelError as error:
        print(f"infill: model error: {error}", file=sys.stderr)
        return EXIT_MODEL
    except KeyboardInterrupt:
        print("infill: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
