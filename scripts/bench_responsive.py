"""Figure `responsive` of scripts/bench: what the rest of a mount costs while one view takes seconds to build,
and how soon the daemon ends once unmounted then (docs/performance.md §2).

On a dense array of one tile of `--responsive-cells` cells (default 8 Mi: the issue's `cells.csv`), each run
on a fresh mount, the two cases interleaved:
- idle: `cat array.yaml` and `ls fragments/`, each timed (wall, and the daemon's CPU seconds meanwhile);
- busy: the same while another process reads `cells.csv` (started `--responsive-head-start` s before, and
  still reading when they are done, or the row says so);
then the mount is unmounted (`tdbfs umount`, lazily in the busy case since the reader holds the file) and the
time until the daemon process has exited is taken, with the CPU seconds it spent in that time (the bench
process adopts the daemon, PR_SET_CHILD_SUBREAPER, and reads them from wait4). The single-threaded loop
(`-o nothreads`, the default before) is measured once beside them, each request given up after
`--responsive-timeout` s.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time

import numpy as np
import tiledb

from bench_lib import ENV, TDBFS, Mount, fmt, interleaved, med, verdict

PR_SET_CHILD_SUBREAPER = 36
#: the issue's goal: `cat array.yaml` (and `ls fragments/`) under 1 s while an 8M-cell cells.csv is read
GOAL_S = 1.0
#: the daemon's end after an unmount, at most
EXIT_GOAL_S = 1.0


def make_one_tile(path: str, cells: int) -> None:
    """A dense 2-D array whose one tile holds about `cells` int32 cells (a side of a power of two)."""
    side = 1 << max(1, (cells.bit_length() - 1) // 2)
    rows = max(1, cells // side)
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, rows - 1), tile=rows, dtype=np.int32),
                        tiledb.Dim("y", domain=(0, side - 1), tile=side, dtype=np.int32))
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(path, "w") as A:
        A[:, :] = {"a": np.arange(rows * side, dtype=np.int32).reshape(rows, side)}


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(cmd: list[str], timeout: float) -> tuple[float, bytes]:
    t = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, timeout=timeout, check=True).stdout
    except subprocess.TimeoutExpired:
        return float("inf"), b""
    return time.perf_counter() - t, out


def _adopt(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)


def _exit_after_unmount(m: Mount, lazy: bool) -> tuple[float, float]:
    """(s from `tdbfs umount` to the daemon's exit, CPU s it spent meanwhile); the daemon is our child."""
    pid = m.pid()
    before = _cpu_s(pid)
    t = time.perf_counter()
    subprocess.run(TDBFS + ["umount", *(["-z"] if lazy else []), m.mnt], env=ENV, capture_output=True)
    deadline = t + 120
    while True:
        done, _status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return time.perf_counter() - t, usage.ru_utime + usage.ru_stime - before
        if time.perf_counter() > deadline:
            return float("inf"), float("nan")
        time.sleep(0.005)


def fig_responsive(args, work, arrays, row):
    print("responsive: requests while cells.csv of one big tile is read; unmount to exit", flush=True)
    cells = args.responsive_cells
    path = os.path.join(work, f"one_tile_{cells}")
    if not os.path.exists(path):
        make_one_tile(path + ".part", cells)
        os.rename(path + ".part", path)
    mnt = os.path.join(work, "mnt")
    timeout = args.responsive_timeout
    facts = {"reader_done_early": 0, "content": set()}

    def case(busy: bool, options=()):
        with Mount(path, mnt, args.cache_mb, options) as m:
            frag = os.listdir(os.path.join(m.mnt, "fragments"))[0]
            reader = None
            if busy:
                reader = subprocess.Popen(["cat", os.path.join(m.mnt, "fragments", frag, "cells.csv")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(args.responsive_head_start)
            cpu0 = _cpu_s(m.pid())
            yaml_s, yaml = _timed(["cat", os.path.join(m.mnt, "array.yaml")], timeout)
            ls_s, names = _timed(["ls", os.path.join(m.mnt, "fragments")], timeout)
            cpu = _cpu_s(m.pid()) - cpu0
            if not options:   # the single-threaded loop's requests are given up: no content to check
                facts["content"].add((path.encode() in yaml, names.split() == [frag.encode()]))
                if reader is not None and reader.poll() is not None:
                    facts["reader_done_early"] += 1
            exit_s, exit_cpu = _exit_after_unmount(m, lazy=busy)
            if reader is not None:
                reader.kill()
                reader.wait()
        return dict(yaml=yaml_s, ls=ls_s, cpu=cpu, exit=exit_s, exit_cpu=exit_cpu)

    _adopt(True)
    try:
        got = interleaved(args.repeat, {"idle": lambda: case(False), "busy": lambda: case(True)})
        old = case(True, ("nothreads",))
    finally:
        _adopt(False)
    idle, busy = got["idle"], got["busy"]
    early = f"; the reader had ended in {facts['reader_done_early']} run(s)" if facts["reader_done_early"] else ""
    wrong = "" if facts["content"] == {(True, True)} else "; WRONG CONTENT"
    for key, what in (("yaml", "`cat array.yaml`"), ("ls", "`ls fragments/`")):
        b, i = [r[key] for r in busy], [r[key] for r in idle]
        row(12, f"{what} while another process reads `cells.csv` of a tile of {cells / 2**20:.0f} Mi cells,"
            f" s (daemon CPU s during both commands: {fmt([r['cpu'] for r in busy])}){early}{wrong}", fmt(b),
            f"idle mount {fmt(i)} (CPU s {fmt([r['cpu'] for r in idle])})", f"{med(b) / med(i):.1f}x",
            verdict(f"< {GOAL_S:.0f} s", max(b) < GOAL_S))
    row(12, f"the same with `-o nothreads` (the single-threaded loop), once: `cat array.yaml`, `ls fragments/`,"
        f" s (given up after {timeout:.0f} s)", f"{old['yaml']:.3f}, {old['ls']:.3f}", "", "", "")
    b, i = [r["exit"] for r in busy], [r["exit"] for r in idle]
    row(12, "`tdbfs umount -z` during that read to the daemon's exit, s (its CPU s meanwhile:"
        f" {fmt([r['exit_cpu'] for r in busy])})", fmt(b),
        f"`tdbfs umount` of an idle mount {fmt(i)} (CPU s {fmt([r['exit_cpu'] for r in idle])})",
        f"{med(b) / med(i):.1f}x", verdict(f"< {EXIT_GOAL_S:.0f} s", max(b) < EXIT_GOAL_S))
    row(12, "`-o nothreads`: `tdbfs umount -z` during that read to the daemon's exit, s, once",
        f"{old['exit']:.3f}", "", "", "")
