"""Fixtures of tests/serve: the shipped model loaded once (`denoiser`), and the team server's app
and replica over it on a real socket (`url`: tests/serve_support.py)."""

from __future__ import annotations

import threading
import time

import pytest
from serve_support import TOKEN, free_port

from infill.models import load
from team_server.auth import read_tokens
from team_server.config import ServerConfig
from team_server.protocols import ModelInfo


@pytest.fixture(scope="module")
def denoiser():
    return load(None, threads=1)


@pytest.fixture(scope="module")
def url(denoiser):
    """The team server's app and replica over the shipped model (the one loaded here: the same
    weights in the same process), on a socket, with one token."""
    uvicorn = pytest.importorskip("uvicorn")  # comes with ray[serve] (the test extra)
    from team_server.app import build_app
    from team_server.replica import Replica

    config = ServerConfig(threads=1, tokens=tuple(sorted(read_tokens(f"carol {TOKEN}\n").items())))
    engine = {"family": None, "recommended": {}, "context_length": denoiser.context_length}
    replica = Replica(denoiser, config, ModelInfo("infill-test", 10, engine=engine))
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(replica), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    replica.close()
