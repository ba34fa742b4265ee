"""`infill serve`: one model for a whole team, on Ray Serve (docs/serving.md).

    infill serve                                  # the shipped model, http://127.0.0.1:8000, one replica
    infill serve --model ~/models/DiffuCoder-7B-Instruct --tokens tokens.txt --host 0.0.0.0
    infill serve --address auto --autoscale 1-4   # a running Ray cluster of GPU machines
    infill serve --tls-cert cert.pem --tls-key key.pem --tokens tokens.txt

It starts a local Ray (or joins the cluster --address names), deploys the replicas
(team_server.deployment) and serves until interrupted. Ray is imported here and nowhere else on
the `infill` command's path: without it, `infill serve` says how to install it and exits with
EXIT_NO_RAY. A local Ray is started without its dashboard; a cluster's own settings are its
owner's (docs/serving.md: keep the dashboard and job API on loopback, with token auth).

Exit codes: 0 stopped by Ctrl-C or SIGTERM, 2 bad arguments or tokens file, 3 the model could not be
loaded, 4 Ray Serve is not installed.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import signal
import sys
import time
from pathlib import Path

from infill.engine.batching import SCHEDULES, schedule_for
from team_server.auth import BODY_LIMIT, BURST, RATE, load_tokens
from team_server.config import MAX_QUEUE, REQUEST_TIMEOUT, ServerConfig

EXIT_OK, EXIT_INPUT, EXIT_MODEL, EXIT_NO_RAY = 0, 2, 3, 4
INSTALL = 'pip install -e ".[serve]" (in a checkout) or pip install "ray[serve]==2.60.0"'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infill serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--model", default=None, metavar="DIR|ORG/NAME[@REV]",
                        help="checkpoint folder (on every machine that runs a replica) or a name in "
                        "the local Hugging Face cache (default: the model shipped with infill)")  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")  # fmt: skip
    parser.add_argument("--port", type=int, default=8000)
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--replicas", type=int, default=1, metavar="N", help="replicas, one model each")
    scale.add_argument("--autoscale", default=None, metavar="MIN-MAX",
                       help="between MIN and MAX replicas, by the requests each has ongoing")  # fmt: skip
    parser.add_argument("--tokens", type=Path, default=None, metavar="FILE",
                        help="`NAME TOKEN` lines: every request needs `Authorization: Bearer TOKEN` "
                        "(default: none needed)")  # fmt: skip
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                        help="serve HTTPS with this certificate...")  # fmt: skip
    parser.add_argument("--tls-key", type=Path, default=None, metavar="FILE", help="...and this private key")
    parser.add_argument("--address", default=None, metavar="RAY_ADDRESS",
                        help="a running Ray cluster to deploy on (`auto`, or HOST:PORT); default: "
                        "start a local Ray on this machine")  # fmt: skip
    engine = parser.add_argument_group("model and limits")
    engine.add_argument("--device", default="auto", help="cuda, cpu or auto (default)")
    engine.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    engine.add_argument("--quantize", default="auto", choices=["auto", "none", "int8", "int4"])
    engine.add_argument("--threads", type=int, default=None, help="CPU threads of each replica's model")
    engine.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT, metavar="SECONDS",
                        help="the most a request may take (a client may ask for less; default %(default)s)")
    engine.add_argument("--max-queue", type=int, default=MAX_QUEUE, metavar="N",
                        help="requests a replica keeps waiting before it answers 503 (default %(default)s)")
    engine.add_argument("--rate", type=float, default=RATE, metavar="PER_SECOND",
                        help="requests a second per token (per client address without tokens), "
                        "per replica (default %(default)s)")  # fmt: skip
    engine.add_argument("--burst", type=int, default=BURST, metavar="N",
                        help="requests a client may send at once before --rate applies (default %(default)s)")
    engine.add_argument("--kept-contexts", type=int, default=0, metavar="N",
                        help="experimental (the replica's memory grows with it: docs/serving.md): keep "
                        "the context of each client's last document (per file where a request "
                        "names its file), for the last N of them in each replica, "
                        "as the language server keeps an open document's: a next fill computes what "
                        "changed, not its whole window (fills then differ from the CLI's in the last "
                        "bits, as the language server's do; the windows stay in memory, never on disk "
                        "or in a log; default 0: every request from nothing, nothing kept)")
    engine.add_argument("--schedule", default="auto", choices=SCHEDULES,
                        help="which waiting passes a forward runs: shared (every waiting request's, in "
                        "one forward: a GPU's), fewest-passes (first the request that has run the fewest, "
                        "with small passes of others beside it: a CPU's, where a forward's time grows "
                        "with the positions it computes; short fills stay quick under load, long ones "
                        "wait); default auto: fewest-passes on a CPU, shared on a GPU")
    engine.add_argument("--cpus", type=int, default=None, metavar="N",
                        help="CPUs of the local Ray (default: all; not with --address)")  # fmt: skip
    return parser


def config_of(args: argparse.Namespace) -> tuple[ServerConfig, int, tuple[int, int] | None]:
    """The replicas' config, the number of replicas and the autoscaling bounds; ValueError for a
    bad value (the tokens file's included)."""
    autoscale = None
    if args.autoscale is not None:
        match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", args.autoscale)
        if match is None or not 1 <= int(match[1]) <= int(match[2]):
            raise ValueError(f"--autoscale takes MIN-MAX with 1 <= MIN <= MAX (got {args.autoscale!r})")
        autoscale = int(match[1]), int(match[2])
    if args.replicas < 1:
        raise ValueError("--replicas must be at least 1")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    for path in (args.tls_cert, args.tls_key):
        if path is not None and not path.is_file():
            raise ValueError(f"{path}: no such file")
    counts = (args.max_queue, args.kept_contexts)
    if args.request_timeout <= 0 or min(counts) < 0 or args.rate <= 0 or args.burst < 1:
        raise ValueError("--request-timeout and --rate must be above 0, --max-queue and --kept-contexts "
                         "0 or more, --burst 1 or more")  # fmt: skip
    tokens = tuple(sorted(load_tokens(args.tokens).items())) if args.tokens is not None else None
    config = ServerConfig(model=args.model, device=args.device, dtype=args.dtype, quantize=args.quantize,
                          threads=args.threads, max_queue=args.max_queue,
                          request_timeout=args.request_timeout, tokens=tokens, rate=args.rate,
                          burst=args.burst, body_limit=BODY_LIMIT,
                          kept_contexts=args.kept_contexts, schedule=args.schedule)  # fmt: skip
    return config, args.replicas, autoscale


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def serve_command(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config, replicas, autoscale = config_of(args)
    except ValueError as error:
        print(f"infill serve: error: {error}", file=sys.stderr)
        return EXIT_INPUT
    try:
        import ray
        from ray import serve
    except ImportError:
        print(f"infill serve: error: Ray Serve is not installed: {INSTALL}", file=sys.stderr)
        return EXIT_NO_RAY
    if config.tokens is None and not is_loopback(args.host):
        print(f"infill serve: warning: listening on {args.host} without --tokens: anyone who reaches "
              "the port can use the model", file=sys.stderr)  # fmt: skip

    from team_server.deployment import application

    if args.address is None:
        ray.init(num_cpus=args.cpus, include_dashboard=False)
    else:
        ray.init(address=args.address)
    # A service manager's stop is Ctrl-C's: set after ray.init, which installs a handler of its own.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        gpus = 1.0 if args.device != "cpu" and ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
        http = {"host": args.host, "port": args.port, "request_timeout_s": config.request_timeout + 30}
        if args.tls_cert is not None:
            http |= {"ssl_certfile": str(args.tls_cert), "ssl_keyfile": str(args.tls_key)}
        serve.start(http_options=http)
        try:
            serve.run(application(config, replicas, autoscale, gpus), name="infill", route_prefix="/")
        except Exception as error:  # a replica that cannot load its model fails the deployment
            print(f"infill serve: model error: the replicas did not start: {error}", file=sys.stderr)
            return EXIT_MODEL
        scheme = "https" if args.tls_cert is not None else "http"
        count = f"{autoscale[0]}-{autoscale[1]}" if autoscale else str(replicas)
        schedule = schedule_for(config.schedule, on_cpu=not gpus)
        print(f"infill serve: {scheme}://{args.host}:{args.port} ({count} replica(s), "
              f"{'1 GPU' if gpus else 'CPU'} each, schedule {schedule}); Ctrl-C stops",
              file=sys.stderr)  # fmt: skip
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        serve.shutdown()
        ray.shutdown()
