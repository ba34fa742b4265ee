"""Two Ray nodes on one machine (ray.cluster_utils.Cluster, as Ray's own tests make them), two
replicas, one killed while requests run: every request is answered (none hangs), the requests
that the dead replica held fail with a 500 from Serve's proxy at once (Serve does not retry an
HTTP request: a plugin asks again on the next keystroke), the others succeed, the next requests
all go to the live replica, and Serve starts a replica in the dead one's place. One run: 6 of 16
answered 200, 10 (the dead replica's) 500. infill's own client (infill.models.served: the CLI's
--server, the language server's endpoint) sends a request that failed so once more: its 8
requests, sent beside those 16, are all answered 200."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest
from external import require_module
from samples import COUNTER_MODULE
from serve_support import free_port

from infill.engine.pipeline import run
from infill.errors import ModelError
from infill.models.served import TeamServer
from infill.modes import FillRequest
from infill.options import InfillOptions
from infill.text.document import document_from_bytes
from infill.text.spans import line_span
from team_server.config import ServerConfig

pytestmark = [pytest.mark.external, pytest.mark.slow]


def replica_names(ray) -> list[str]:
    actors = ray.util.list_named_actors(all_namespaces=True)
    return sorted(a["name"] for a in actors if a["namespace"] == "serve" and "REPLICA" in a["name"])


def test_two_nodes_two_replicas_one_killed_under_load():
    ray = require_module("ray", 'pip install -e ".[serve]"')
    from ray import serve
    from ray.cluster_utils import Cluster

    from team_server.deployment import application

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    port = free_port()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(application(ServerConfig(threads=1), replicas=2), name="infill", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        names = replica_names(ray)
        assert len(names) == 2  # one a node: each node has one CPU, each replica takes one

        def fill(line: int) -> int:
            body = {"text": COUNTER_MODULE, "spans": [{"lines": line}]}
            try:
                return httpx.post(url + "/v1/infill", json=body, timeout=120).status_code
            except httpx.HTTPError:
                return -1  # the connection itself failed: still an answer, not a hang

        served = TeamServer.connect(url)
        document = document_from_bytes(COUNTER_MODULE.encode())

        def client_fill(line: int) -> int:  # infill's own client (--server, endpoint): sends a 500 again
            request = FillRequest(document, [line_span(COUNTER_MODULE, line, line)], InfillOptions())
            try:
                run(served, request)
                return 200
            except ModelError as error:
                return int("500" in str(error)) * 500 or -1

        lines = [6, 10, 11, 12, 13, 18, 21, 22] * 2
        with concurrent.futures.ThreadPoolExecutor(24) as pool:
            answers = [pool.submit(fill, line) for line in lines]
            ours = [pool.submit(client_fill, line) for line in lines[:8]]
            time.sleep(0.5)
            ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=False)
            statuses = [answer.result(timeout=180) for answer in answers]
            clients = [answer.result(timeout=180) for answer in ours]
        assert len(statuses) == 16  # every request answered, none hangs
        assert set(statuses) <= {200, 500} and 200 in statuses, statuses  # the dead replica's: 500 at once
        assert clients == [200] * 8, clients  # sent again, to the live replica
        after = [fill(line) for line in (6, 10, 11, 12)]
        assert after == [200] * 4  # the dead replica's requests go elsewhere now
        deadline = time.monotonic() + 120
        while len(replica_names(ray)) < 2:  # Serve starts a replica in its place
            assert time.monotonic() < deadline, "the replica did not come back"
            time.sleep(1)
    finally:
        serve.shutdown()
        ray.shutdown()
        cluster.shutdown()
