"""Figure 8 of scripts/bench, `reader`: what TileDB returns, through a mount.

`cat as_of/now/cells.csv` of the dense array (figure 1's, 64 Mi int32 cells by default) through a fresh
mount with a small cache bound: the rate in cells per second against tiledb-py reading the same cells
(dimension and attribute, a fresh process, only the read timed), the two interleaved, each side's CPU
seconds beside its wall time; the daemon's peak RSS against the cache bound plus a constant. The CSV's
header, its last row's coordinate and its row count are checked against tiledb-py's cells, and its size
against `stat`."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench_lib import Mount, fmt, interleaved, med, status_kib, verdict, warm

TILEDB_CELLS = """
import resource, sys, time, tiledb
path = sys.argv[1]
with tiledb.open(path, ctx=tiledb.Ctx()) as A:
    ned = A.nonempty_domain()
    q = A.query(coords=True)
    c, t = time.process_time(), time.perf_counter()
    r = q[tuple(slice(lo, hi + 1) for lo, hi in ned)]
    dt, cpu = time.perf_counter() - t, time.process_time() - c
print(dt, cpu, len(next(iter(r.values())).ravel()))
"""


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/<pid>/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fig_reader(args, work, arrays, row, mnt):
    print("8. what TileDB returns", flush=True)
    path = arrays["dense"]
    warm(path)
    bound = args.reader_cache_mb
    seen = {}

    def ours():
        with Mount(path, mnt, bound) as m:
            pid = m.pid()
            idle = status_kib(pid, "VmRSS") / 1024
            cells = os.path.join(m.mnt, "as_of", "now", "cells.csv")
            cpu0, t = _cpu_s(pid), time.perf_counter()
            size = os.stat(cells).st_size
            with open(cells, "rb") as f:
                got, lines, first = 0, 0, f.readline()
                while True:
                    block = f.read(1 << 20)
                    if not block:
                        break
                    got += len(block)
                    lines += block.count(b"\n")
                    last = block
            dt, cpu = time.perf_counter() - t, _cpu_s(pid) - cpu0
            if got + len(first) != size:
                raise RuntimeError(f"as_of/now/cells.csv: stat says {size} bytes, cat read {got + len(first)}")
            seen.update(cells=lines, bytes=size, header=first, tail=last.rstrip(b"\n").rsplit(b"\n", 1)[-1],
                        peak=status_kib(pid, "VmHWM") / 1024, idle=idle)
            seen.setdefault("cpu", []).append(cpu)
            return lines / dt

    def theirs():
        out = subprocess.run([sys.executable, "-c", TILEDB_CELLS, path], check=True, capture_output=True, text=True)
        dt, cpu, n = out.stdout.split()
        seen["tiledb_cells"] = int(n)
        seen.setdefault("tiledb_cpu", []).append(float(cpu))
        return int(n) / float(dt)

    got = interleaved(args.repeat, {"tdbfs": ours, "tiledb": theirs})
    if not seen["header"].startswith(b"d,a,fragment,tile"):
        raise RuntimeError(f"as_of/now/cells.csv begins {seen['header'][:80]!r}, not the dense array's columns")
    if not seen["tail"].startswith(f"{seen['tiledb_cells'] - 1},".encode()):
        raise RuntimeError(f"as_of/now/cells.csv ends {seen['tail'][:80]!r}, not at the last cell")
    if seen["cells"] != seen["tiledb_cells"]:
        raise RuntimeError(f"as_of/now/cells.csv has {seen['cells']} rows, tiledb-py reads {seen['tiledb_cells']}")
    ratio = med(got["tdbfs"]) / med(got["tiledb"])
    row(8, f"`cat as_of/now/cells.csv` of the dense array ({seen['cells']:,} cells, {seen['bytes'] / 2**20:.0f} MiB"
        f" of CSV), --cache-mb {bound}, Mcells/s (daemon CPU s {fmt(seen['cpu'], digits=1)})",
        fmt(got["tdbfs"], scale=1e-6), f"tiledb-py read of the same cells {fmt(got['tiledb'], scale=1e-6)}"
        f" (CPU s {fmt(seen['tiledb_cpu'], digits=2)})", f"{ratio:.3f}", "")
    limit = bound + seen["idle"] + 64
    row(8, f"daemon peak RSS while reading it, MiB", f"{seen['peak']:.0f}", f"idle {seen['idle']:.0f}",
        f"{seen['peak'] - seen['idle']:.0f} above idle",
        verdict(f"< {limit:.0f} (bound + idle + 64)", seen["peak"] < limit))
