"""A real Dask cluster on loopback for the tests: distributed's LocalCluster, a scheduler and two worker
processes of one thread each, started with the environment the workers need.

    with local_cluster({"AWS_ACCESS_KEY_ID": ...}) as cluster:
        cluster.scheduler_address                 # tcp://127.0.0.1:PORT, for `tdbfs check --dask`
        before = computed_keys(cluster)           # {worker: {task keys it computed}}
"""

from __future__ import annotations

import contextlib
import os
import logging
from typing import Iterator


@contextlib.contextmanager
def local_cluster(env: dict[str, str] | None = None) -> Iterator:
    """Worker processes get `env` on top of this process's environment. The scheduler's HTTP server (there
    even without a dashboard) takes a free port: 8787 may be another cluster's."""
    from distributed import LocalCluster

    # the nannies set their workers' environment (distributed's `nanny.pre-spawn-environ`, MALLOC_TRIM_THRESHOLD_
    # among it) in this process's os.environ: put it back, or later tests' daemons would inherit it
    saved = dict(os.environ)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=":0", env=dict(env or {}), silence_logs=logging.ERROR)
    try:
        yield cluster
    finally:
        cluster.close()
        os.environ.clear()
        os.environ.update(saved)


def computed_keys(cluster, prefix: str = "tdbfs-check-") -> dict[str, set[str]]:
    """Per worker address, the keys starting with `prefix` that the worker computed (went from executing
    to memory in its own state log): the proof that a task ran there and not in the caller."""
    from distributed import Client

    def mine(dask_worker):
        return {e[0] for e in dask_worker.state.log
                if isinstance(e[0], str) and e[0].startswith(prefix) and e[1:3] == ("executing", "memory")}

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        return client.run(mine)
