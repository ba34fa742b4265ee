"""For tests/serve: the team server's app and replica in this process, on a real socket (uvicorn in
a thread, no Ray): what the project's own clients and `infill-bench serve` talk to in the fast
tests (the fixtures `denoiser` and `url`: tests/serve/conftest.py). Ray Serve itself is started
in tests/serve/test_server.py and test_cluster.py."""

from __future__ import annotations

import socket

TOKEN = "carol-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
