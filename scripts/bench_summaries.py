"""Figure 3's summaries: array.yaml, stats.csv, timeline.csv and fragments.svg of the many-fragment array,
each on a fresh mount against tiledb-py's FragmentInfoList (`tiledb.array_fragments`) on the same array,
the two interleaved, CPU seconds beside wall time; then a second look on the same mount (the summary
kept), and a look after one new fragment (its own footer, not the whole pass again).

The daemon's CPU seconds are those of the daemon and every process under it (the worker processes of
store/digest_pool.py are children of its fork server, which reaps them): utime + stime, plus the
cutime + cstime of what each has reaped, read from /proc just before the unmount. tiledb-py's are
taken in a fresh process of its own, around the call only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid

from bench_lib import Mount, descendants, fmt, interleaved, med, verdict

SUMMARIES = ("array.yaml", "stats.csv", "timeline.csv", "fragments.svg")

TILEDB_INFO = """
import sys, time, tiledb
path = sys.argv[1]
t, c = time.perf_counter(), time.process_time()
info = tiledb.array_fragments(path)
n = len(info)
print(time.perf_counter() - t, time.process_time() - c, n)
"""


def tiledb_fragment_info(path: str, expect: int) -> tuple[float, float]:
    """(wall s, CPU s) of tiledb-py's FragmentInfoList in a fresh process."""
    out = subprocess.run([sys.executable, "-c", TILEDB_INFO, path], check=True, capture_output=True, text=True)
    wall, cpu, n = out.stdout.split()
    if int(n) != expect:
        raise RuntimeError(f"tiledb-py lists {n} fragments of {path}, not {expect}")
    return float(wall), float(cpu)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and every process under it, with what each has reaped of its children."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])   # utime stime cutime cstime (fields 14-17)
    return total / tick


def cat_s(mnt: str, name: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    out = subprocess.run(["cat", os.path.join(mnt, name)], capture_output=True, check=True).stdout
    dt = time.perf_counter() - t
    if not out:
        raise RuntimeError(f"{name} is empty")
    return dt, out


def looks(path: str, mnt: str, cache_mb: int, name: str, new_fragment) -> dict:
    """On one fresh mount: the first `cat name` (wall, daemon CPU), the second, and the one after a new
    fragment came (whose name it must show, but array.yaml, which counts fragments)."""
    with Mount(path, mnt, cache_mb) as m:
        pid = m.pid()
        c0 = tree_cpu_s(pid)
        first, data = cat_s(m.mnt, name)
        c1 = tree_cpu_s(pid)
        second, again = cat_s(m.mnt, name)
        c2 = tree_cpu_s(pid)
        if again != data and name != "array.yaml":   # array.yaml's `checked:` follows the background check
            raise RuntimeError(f"{name}: the second look differs from the first")
        added = new_fragment()
        try:
            time.sleep(1.1)   # past the tick of the folders' mtimes (store/base_store.py MTIME_TICK_NS)
            c3 = tree_cpu_s(pid)
            third, after = cat_s(m.mnt, name)
            c4 = tree_cpu_s(pid)
        finally:
            added.remove()
    shown = added.name.encode() in after if name != "array.yaml" else after != data
    if not shown:
        raise RuntimeError(f"{name}: the look after a new fragment does not show it")
    return dict(first=first, first_cpu=c1 - c0, second=second, second_cpu=c2 - c1, new=third, new_cpu=c4 - c3)


class NewFragment:
    """One more committed fragment: hard links of the newest one's files under the next timestamp (as
    bench_lib.make_fragments makes them), removed again with its commit."""

    def __init__(self, path: str):
        frags = os.path.join(path, "__fragments")
        newest = max(os.listdir(frags), key=lambda s: (int(s.split("_")[2]), s))
        t = int(newest.split("_")[2]) + 1
        self.name = f"__{t}_{t}_{uuid.uuid4().hex}_{newest.split('_')[-1]}"
        self.folder = os.path.join(frags, self.name)
        self.commit = os.path.join(path, "__commits", self.name + ".wrt")
        os.mkdir(self.folder)
        for f in os.listdir(os.path.join(frags, newest)):
            os.link(os.path.join(frags, newest, f), os.path.join(self.folder, f))
        open(self.commit, "wb").close()

    def remove(self):
        os.remove(self.commit)
        shutil.rmtree(self.folder)


def fig_summaries(args, work, arrays, row):
    """Rows of figure 3: each summary of the many-fragment array against FragmentInfoList."""
    many = args.many_fragments
    path = arrays[f"frag{many}"]
    mnt = os.path.join(work, "mnt")
    for name in SUMMARIES:
        got = interleaved(args.repeat, {
            "tdbfs": lambda name=name: looks(path, mnt, args.cache_mb, name, lambda: NewFragment(path)),
            "tiledb": lambda: tiledb_fragment_info(path, many)})
        ours = got["tdbfs"]
        wall = [x["first"] for x in ours]
        cpu = [x["first_cpu"] for x in ours]
        t_wall = [w for w, _ in got["tiledb"]]
        t_cpu = [c for _, c in got["tiledb"]]
        ratio = med(wall) / med(t_wall)
        row(3, f"`cat {name}` on a fresh mount, {many:,} fragments, s (CPU s)",
            f"{fmt(wall)} (CPU {fmt(cpu)})", f"tiledb-py FragmentInfoList {fmt(t_wall)} (CPU {fmt(t_cpu)})",
            f"{ratio:.2f} (CPU {med(cpu) / med(t_cpu):.2f})", verdict("≤ 1", ratio <= 1))
        second = [x["second"] for x in ours]
        ratio = med(second) / med(t_wall)
        row(3, f"`cat {name}` again on that mount (unchanged array), s (CPU s)",
            f"{fmt(second)} (CPU {fmt([x['second_cpu'] for x in ours])})", f"tiledb-py FragmentInfoList {fmt(t_wall)}",
            f"{ratio:.3f}", verdict("≤ 1", ratio <= 1))
        new = [x["new"] for x in ours]
        ratio = med(new) / med(wall)
        row(3, f"`cat {name}` after one new fragment on that mount, s (CPU s)",
            f"{fmt(new)} (CPU {fmt([x['new_cpu'] for x in ours])})", f"the first look {fmt(wall)}",
            f"{ratio:.3f}", verdict("≤ 1", ratio <= 1))
