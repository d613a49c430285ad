"""The library's one door to the other front ends: `Array.check()` runs the check `tdbfs check` runs.

Every import of check or command-line code by the library is here, and only here, so that a move of
those packages changes this module alone.
"""

from __future__ import annotations

from ..check.check import CheckResult  # noqa: F401 -- tdbfs.CheckResult: what Array.check() returns


def run_check(obj, jobs: int = 1):
    """check.CheckResult of the array, group or workspace `obj` (library/base.py StoreObject): the
    findings `tdbfs check` prints (`to_dict()` is its `--json`). With `jobs` > 1 the fragments are checked
    by that many worker processes, each opening the location again, as `tdbfs check --jobs N` does."""
    from ..check.check import check_array

    jobs = int(jobs)
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    if jobs == 1:
        return check_array(obj.store)
    from ..check.pool import ProcessPool
    from ..check.work import MIN_WORKER_CACHE_MB, StoreSpec, new_run

    opened = obj._opened
    spec = StoreSpec(opened.location, max(MIN_WORKER_CACHE_MB, opened.cache_mb // jobs), opened.remote,
                     opened.key.reveal() if opened.key is not None else None, new_run())
    with ProcessPool(jobs, spec) as executor:
        return check_array(obj.store, None, executor, spec)

