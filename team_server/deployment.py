"""The Ray Serve deployment: each replica loads the model once and keeps one batching driver
(team_server.replica), and serves the FastAPI app built over them (team_server.app).

Ray Serve's own batching (`@serve.batch`) forms a batch of requests once and runs it to its end;
the batching driver (infill.engine.batching) instead lets a request join between two denoising
passes and leave when its fill is done, so Serve is used for what it does well: placing replicas
on GPU machines, routing, autoscaling, restarting a replica that dies, HTTP(S).

    one replica    one model on one GPU (`num_gpus=1` where the cluster has GPUs, else on the CPU)
    routing        a replica takes up to `max_ongoing_requests` requests at once: the driver's live
                   requests and its queue, and some headroom (health checks, metrics), so that the
                   replica, not Serve's proxy, answers 503 when it is full
    scaling        a fixed number of replicas, or autoscaling between MIN and MAX on the requests
                   each replica has ongoing (`target_ongoing_requests`: the driver's live requests)
    memory         the replica's process starts with glibc's MALLOC_ARENA_MAX=2 and a smaller oneDNN
                   cache of product shapes (team_server.memory)

Imports Ray: only `infill serve` (team_server.cli) and the tests that start Ray import this module.
"""

from __future__ import annotations

from ray import serve

from team_server.app import build_app
from team_server.config import ServerConfig
from team_server.memory import REPLICA_ENV
from team_server.replica import Replica

HEADROOM = 16  # requests a replica takes beyond its live and queued ones (health, metrics, model lists)


@serve.deployment(name="infill")
@serve.ingress()
class InfillDeployment:
    def __init__(self, config: ServerConfig) -> None:
        self.replica = Replica.start(config)

    def __serve_build_asgi_app__(self):
        return build_app(self.replica)

    def __del__(self) -> None:
        replica = getattr(self, "replica", None)
        if replica is not None:
            replica.close()


def application(config: ServerConfig, replicas: int = 1, autoscale: tuple[int, int] | None = None,
                gpus: float = 0.0):  # fmt: skip
    """The deployment, bound to `config`: `replicas` of it, or between autoscale's bounds; each
    replica takes `gpus` GPUs (1 on a GPU cluster) and one CPU."""
    options: dict = {
        "max_ongoing_requests": config.max_live + config.max_queue + HEADROOM,
        "ray_actor_options": {"num_gpus": gpus, "num_cpus": 1, "runtime_env": {"env_vars": REPLICA_ENV}},
        "graceful_shutdown_timeout_s": config.request_timeout,
    }
    if autoscale is not None:
        low, high = autoscale
        options["autoscaling_config"] = {"min_replicas": low, "max_replicas": high,
                                         "target_ongoing_requests": config.max_live}  # fmt: skip
    else:
        options["num_replicas"] = replicas
    return InfillDeployment.options(**options).bind(config)
