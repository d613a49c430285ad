"""`tdbfs check --jobs N`: the check's tasks (work.py) run in N local worker processes.

Workers start from a fork server (the parent may hold threads, such as an object store's event loop,
which a plain fork would copy mid-flight) that imported what a task needs while the parent was opening
the array: forked from the parent instead, each worker would import numpy itself (measured: 0.52 s
of CPU per worker for 128 MiB of ZSTD tiles, against 0.38 s from the fork server). A worker that dies
(killed, out of memory) takes its pool down: the tasks that were running are then run again one by one, each in a
process of its own, so the one that kills its process is named (work.died) and the others still
give their results; the rest go on in a new pool.

Workers that start only when the first task is ready would idle through the parent's planning (listing,
tile counts of the big fragments) and then spend their first moments importing and opening the array: so
the fork server starts as soon as the command line says `--jobs N` (start_fork_server), and given a spec
the pool starts its workers at once, each opening its store of the array (work.open_store) while the
parent plans.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import forkserver

from .work import died, open_store

#: tasks handed to the pool ahead, per worker: enough that no worker waits for the parent
AHEAD_PER_WORKER = 2

#: what a task imports, imported once by the fork server rather than by every worker (numpy alone is
#: ~130 ms of CPU a process); tdbfs.cli.main: a worker imports the parent's main module (`python -m
#: tdbfs.cli`) before its first task, as multiprocessing prepares every child
PRELOAD = ["tdbfs.check.work", "tdbfs.store.open_array", "numpy", "tdbfs.store.array_store", "tdbfs.store.fragment",
           "tdbfs.store.findings", "tdbfs.format.schema", "tdbfs.format.reversers.compressors", "tdbfs.cli.main"]


def start_fork_server():
    """Start the fork server and its imports now, beside what the caller does next (`tdbfs check --jobs N`
    opening the array); the pools made later use it."""
    return _context()


def _context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()   # its imports now, beside the parent's own work on the array
    return ctx


class ProcessPool:
    """An executor of check tasks (work.py): `run(fn, spec, tasks)` yields each task's TaskResult as it is done.
    The workers (and their stores) last until `close()`, so the members of a group share them."""

    def __init__(self, jobs: int, spec=None):
        """With `spec` (work.StoreSpec), the workers start now and open the array, while the caller plans."""
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None
        self._ctx = _context()
        self._spec = spec
        if spec is not None:
            self._start()
            # each submit that finds no idle worker starts one (concurrent.futures): all of them now
            for _ in range(jobs):
                self._pool.submit(_nothing)

    def _start(self) -> None:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=self._ctx, initializer=_start_worker,
                                             initargs=(dict(os.environ), self._spec))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def run(self, fn, spec, tasks):
        todo = deque(tasks)
        while todo:
            self._start()
            running: dict = {}
            suspects = []
            while (todo or running) and not suspects:
                while todo and len(running) < self.jobs * AHEAD_PER_WORKER:
                    task = todo.popleft()
                    running[self._pool.submit(fn, spec, task)] = task
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = running.pop(fut)
                    try:
                        yield fut.result()
                    except BrokenProcessPool:
                        suspects.append(task)
                    except Exception as exc:  # noqa: BLE001 -- a failure of the check itself, said as a problem
                        yield died(task, f"{type(exc).__name__}: {exc}")
            if suspects:
                self.close()
                suspects += running.values()
                for task in sorted(suspects, key=lambda t: t.index):
                    yield _alone(self._ctx, fn, spec, task)


def _alone(ctx, fn, spec, task):
    """The task's result from a process of its own, or, when that process dies too, why."""
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_send_result, args=(fn, spec, task, send, dict(os.environ)), daemon=True)
    proc.start()
    send.close()
    try:
        result = receive.recv()
    except EOFError:
        result = None
    proc.join()
    receive.close()
    if result is not None:
        return result
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            why = f"its process was killed by {signal.Signals(-code).name}"
        except ValueError:
            why = f"its process was killed by signal {-code}"
    else:
        why = f"its process exited with status {code}"
    return died(task, why + " (out of memory?)" if code == -signal.SIGKILL else why)


def _nothing() -> None:
    pass


def _start_worker(environ: dict, spec) -> None:
    """A worker's first moments: the parent's environment, then its store of `spec` (when given)."""
    _adopt_environment(environ)
    if spec is not None:
        open_store(spec)


def _adopt_environment(environ: dict) -> None:
    """The parent's environment as it is now: the fork server keeps the one it started with, and the object
    stores' SDKs read their credentials and endpoints from it (a later check may have other ones)."""
    os.environ.clear()
    os.environ.update(environ)


def _send_result(fn, spec, task, send, environ) -> None:
    _adopt_environment(environ)
    try:
        result = fn(spec, task)
    except Exception as exc:  # noqa: BLE001 -- a failure of the check itself, said as a problem
        result = died(task, f"{type(exc).__name__}: {exc}")
    send.send(result)
    send.close()
