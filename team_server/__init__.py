"""The team server: one model for a whole team, behind the APIs editor plugins already speak
(`infill serve`, docs/serving.md).

    protocols   each API's request as the project's own, and the answer back (plain functions)
    auth        tokens, the rate per client, the body's size (401, 429, 413)
    metrics     a replica's counters as Prometheus text
    config      what a replica is started with (one frozen dataclass)
    replica     the model, its batching driver (infill.engine.batching), the gate and the counters
    app         the FastAPI app of one replica: the endpoints
    deployment  the Ray Serve deployment (imports Ray)
    cli         `infill serve` (imports Ray when it runs)

Requests go through `infill.engine.pipeline.run`, as the CLI's and the language server's do, with
their passes batched across users by the batching driver.
"""
