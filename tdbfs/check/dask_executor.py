"""`tdbfs check --dask ADDRESS`: the tasks of work.py run on an existing Dask distributed cluster.

Each worker opens the array itself from the task's `StoreSpec` (a path every worker reaches, or an
object store's URL) and sends back only a `TaskResult`: problems and counters, never tile bytes.
check.py merges the results in the order `--jobs 1` finds them, so the output is the same.

Nothing secret crosses the cluster's network: the spec shipped carries no encryption key and no secret
backend option (`s3.secret`, `az.account_key`, tokens...); workers use their own environment
(`TDBFS_KEY_FILE` / `TDBFS_ENCRYPTION_KEY`, `AWS_*`, instance roles). Before anything is submitted,
every worker is asked for its versions (tdbfs, distributed, Python) and, for an encrypted array, a
fingerprint of its key, so a worker that cannot decrypt is one line and exit 2, not a problem on every
tile.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import uuid
import warnings

from .. import __version__
from .work import died, new_run
from ..frontend.common import CliError
from ..frontend.remote_options import is_secret_option

#: seconds allowed to reach the scheduler and to see a first worker
CONNECT_TIMEOUT_S = 10.0

EXTRA_MISSING = "--dask needs the 'dask' extra: pip install 'tdbfs[dask]'"

#: distributed and tornado log warnings (ports in use, deprecations, slow event loops) that are not the
#: user's business; only their errors may reach stderr
_NOISY_LOGGERS = ("distributed", "tornado")


class DaskExecutor:
    """An executor of work.py tasks on the cluster whose scheduler is at `address` (`tcp://host:port`), or at
    `scheduler` where `address` named a scheduler file the front end read (messages name `address`).
    Connects at once, so an unreachable scheduler fails before the check starts; `close()` (or `with`)
    disconnects."""

    def __init__(self, address: str, connect_timeout: float = CONNECT_TIMEOUT_S, scheduler: str | None = None,
                 spec=None):
        """With `spec` (work.StoreSpec), every worker is asked about its versions now and then opens the
        array (imports, listing) while the caller plans."""
        self.address = address
        self.client = _connect(address, connect_timeout, scheduler or address)
        self._checked: set = set()   # fingerprints the workers were already asked about
        self._shipped: tuple | None = None   # (spec, shippable(spec)): one run, so workers keep one store
        if spec is not None:
            try:
                self._open_ahead(spec)
            except BaseException:
                self.close()
                raise

    def _open_ahead(self, spec) -> None:
        from distributed import fire_and_forget

        self._check_workers(spec)
        shipped = self._ship(spec)
        prefix = f"tdbfs-open-{uuid.uuid4().hex[:12]}"
        for i, worker in enumerate(sorted(self.client.scheduler_info()["workers"])):
            fire_and_forget(self.client.submit(open_ahead, shipped, key=f"{prefix}-{i}", workers=[worker],
                                               allow_other_workers=False, pure=False))

    def _ship(self, spec):
        if self._shipped is None or self._shipped[0] != spec:
            self._shipped = (spec, shippable(spec))
        return self._shipped[1]

    def run(self, fn, spec, tasks):
        """`fn(spec, task)` for every task on the cluster; TaskResults as they complete."""
        tasks = list(tasks)
        if not tasks:
            return
        self._check_workers(spec)
        from distributed import as_completed

        shipped = self._ship(spec)
        prefix = f"tdbfs-check-{uuid.uuid4().hex[:12]}"
        futures = {self.client.submit(one_at_a_time, fn, shipped, task, key=f"{prefix}-{task.index}",
                                      pure=False): task for task in tasks}
        try:
            for future, result in as_completed(futures, loop=self.client.loop, with_results=True,
                                               raise_errors=False):   # results fetched as they come
                task = futures.pop(future)
                if future.status == "finished":
                    yield result
                else:   # KilledWorker, a lost scheduler, an exception run_task let through
                    yield died(task, _one_line(future.exception()) if future.status == "error" else future.status)
                future.release()
        finally:   # Ctrl-C, an error, or the consumer stopped: nothing keeps running for us
            if futures:
                self.client.cancel(list(futures), force=True)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "DaskExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_workers(self, spec) -> None:
        """Every worker runs the versions this process runs and, for an encrypted array, holds the same key."""
        want = fingerprint(spec.key)
        if want in self._checked:
            return
        try:
            facts = self.client.run(worker_facts)
        except Exception as exc:  # noqa: BLE001 -- a worker without tdbfs cannot unpickle worker_facts
            raise CliError(f"the Dask workers at {self.address} cannot run tdbfs {__version__} "
                           f"(install 'tdbfs[dask]' on them): {_one_line(exc)}", code=2) from None
        here = versions()
        for worker, fact in sorted(facts.items()):
            # an older tdbfs on the worker may answer in another shape
            shaped = isinstance(fact, tuple) and len(fact) == 2 and isinstance(fact[0], dict)
            theirs, key = fact if shaped else ({}, None)
            for name, version in here.items():
                if theirs.get(name) != version:
                    raise CliError(f"Dask worker {worker} runs {name} {theirs.get(name, '(another version)')}, "
                                   f"this is {name} {version}: "
                                   f"install the same Python, tdbfs and distributed everywhere", code=2)
            if want is not None and key != want:
                why = "has no key" if key is None else key if key.startswith("bad key") else "has another key"
                raise CliError(f"the array is encrypted and Dask worker {worker} {why}: the key never travels "
                               f"to the cluster, set TDBFS_KEY_FILE or TDBFS_ENCRYPTION_KEY on every worker",
                               code=2)
        self._checked.add(want)


def shippable(spec):
    """`spec` as it may travel to the cluster: no key, no secret backend option, no --cache-dir (a folder
    of this machine), and a run of its own, since workers outlive a check (work.StoreSpec.run)."""
    remote = spec.remote
    if remote is not None:
        options = {family: _without_secrets(opts) for family, opts in remote.options.items()}
        remote = dataclasses.replace(remote, options=options, cache_dir=None)
    return dataclasses.replace(spec, key=None, remote=remote, run=spec.run or new_run())


def _without_secrets(options):
    if not isinstance(options, dict):
        return options
    return {k: _without_secrets(v) for k, v in options.items() if not is_secret_option(str(k))}


_one_task = threading.Lock()


def one_at_a_time(fn, spec, task):
    """`fn(spec, task)`, one task at a time in a worker process whatever its thread count: run_task keeps
    one store per process and reads the problems its task added to the logs, which a task running
    beside it on another thread would add to."""
    with _one_task:
        return fn(spec, task)


def open_ahead(spec) -> None:
    """work.open_store in a worker, as one task (one_at_a_time)."""
    from .work import open_store

    with _one_task:
        open_store(spec)


def versions() -> dict[str, str]:
    """What must be the same in the CLI and on every worker: pickles of tdbfs's classes and of
    distributed's messages cross between them."""
    import sys

    import distributed

    return {"tdbfs": __version__, "distributed": distributed.__version__,
            "Python": f"{sys.version_info[0]}.{sys.version_info[1]}"}


def worker_facts() -> tuple[dict[str, str], str | None]:
    """(versions(), fingerprint of the key in this worker's environment, or why it is unusable)."""
    from ..frontend.keys import BadKeyError, key_from_environment

    try:
        key = key_from_environment()
    except (BadKeyError, OSError) as exc:
        return versions(), f"bad key: {_one_line(exc)}"
    return versions(), fingerprint(key.reveal() if key is not None else None)


def fingerprint(key: bytes | None) -> str | None:
    """A digest that tells keys apart without revealing them (SHA-256 of a 32-byte random key)."""
    return None if key is None else hashlib.sha256(b"tdbfs key fingerprint\0" + key).hexdigest()


def require_distributed() -> None:
    """One line naming the extra when distributed is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise CliError(EXTRA_MISSING, code=2) from None


def _connect(address: str, timeout: float, scheduler: str):
    require_distributed()
    import distributed

    _quiet()
    _reachable(scheduler, timeout)
    try:
        client = distributed.Client(scheduler, timeout=timeout, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 -- it went away since the handshake
        raise CliError(f"cannot reach the Dask scheduler at {address}: {_one_line(exc)}", code=2) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError):
        client.close()
        raise CliError(f"the Dask scheduler at {address} has no workers (waited {timeout:g} s)", code=2) from None
    return client


def _reachable(address: str, timeout: float) -> None:
    """Dask's handshake, without a Client: a Client that fails to connect is collected only after a
    second timeout, printing a traceback while it is."""
    import asyncio

    from distributed.comm import connect

    async def handshake():
        comm = await connect(address, timeout=timeout)
        await comm.close()

    try:
        asyncio.run(handshake())
    except ValueError as exc:
        raise CliError(f"not a Dask scheduler address: {address} ({_one_line(exc)}); "
                       f"give tcp://HOST:PORT or a scheduler file", code=2) from None
    except OSError as exc:
        raise CliError(f"cannot reach the Dask scheduler at {address}: {_one_line(exc)}", code=2) from None
    except Exception as exc:  # noqa: BLE001 -- something else answers there
        raise CliError(f"no Dask scheduler answers at {address} (something else listens there: "
                       f"{type(exc).__name__})", code=2) from None


def _quiet() -> None:
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for module in ("distributed", "tornado", "dask"):
        warnings.filterwarnings("ignore", module=module)


def _one_line(exc) -> str:
    text = f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc)
    return " ".join(text.split())
