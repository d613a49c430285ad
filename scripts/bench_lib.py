"""What `scripts/bench` measures with: its arrays, a real mount, process memory, interleaved runs."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import tiledb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TDBFS = [sys.executable, "-m", "tdbfs.cli"]
ENV = dict(os.environ, PYTHONPATH=ROOT)
DENSE_TILE = 1 << 20      # 4 MiB int32 tiles, TileDB cuts them into 64 KiB ZSTD chunks
SPARSE_CAPACITY = 100_000  # 2**24 cells -> 168 tiles of a0 and of d0: the 336 tile files


def _zstd_int32(name: str) -> tiledb.Attr:
    return tiledb.Attr(name, dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter()]))


# ----------------------------------------------------------------------------- arrays

def make_dense(path: str, cells: int) -> None:
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, cells - 1), tile=DENSE_TILE, dtype=np.int64))
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[_zstd_int32("a")]))
    rng = np.random.default_rng(1)
    with tiledb.open(path, "w") as A:
        A[0:cells] = {"a": np.arange(cells, dtype=np.int32) + rng.integers(0, 64, cells, dtype=np.int32)}


def make_sparse(path: str, cells: int) -> None:
    dim = tiledb.Dim("d", domain=(0, 1 << 40), tile=1 << 30, dtype=np.int64,
                     filters=tiledb.FilterList([tiledb.ZstdFilter()]))
    schema = tiledb.ArraySchema(domain=tiledb.Domain(dim), sparse=True, capacity=SPARSE_CAPACITY,
                                attrs=[_zstd_int32("a")])
    tiledb.Array.create(path, schema)
    rng = np.random.default_rng(2)
    with tiledb.open(path, "w") as A:
        A[np.arange(cells, dtype=np.int64) * 3] = {"a": np.arange(cells, dtype=np.int32)
                                                   + rng.integers(0, 64, cells, dtype=np.int32)}


def make_check_array(path: str, cells: int, small: int) -> None:
    """What `check` meets on a big array: one big fragment and `small` small ones over parts of it."""
    make_dense(path, cells)
    rng = np.random.default_rng(3)
    part = max(DENSE_TILE, cells // 32 // DENSE_TILE * DENSE_TILE)
    for i in range(small):
        lo = (i * part) % cells
        with tiledb.open(path, "w") as A:
            A[lo:lo + part] = {"a": rng.integers(0, 1 << 20, part, dtype=np.int32)}


#: the first fragment's timestamp: milliseconds since the epoch, as TileDB stamps a write. All names
#: then have one length and sort in time order, as in an array written at the current time (timestamps
#: 1..n gave names of 1 to 6 digits, interleaved in the folder's order)
FIRST_TIMESTAMP_MS = 1_700_000_000_000


def make_fragments(path: str, n: int) -> None:
    """n real fragments: one written by tiledb-py, the others hard links of its files under the next
    timestamps and new uuids (fragment contents do not name themselves in format 22), each with its
    commit file; tiledb-py's fragment list must then see exactly n."""
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 1023), tile=64, dtype=np.int64))
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, sparse=False, attrs=[_zstd_int32("a")]))
    with tiledb.open(path, "w", timestamp=FIRST_TIMESTAMP_MS) as A:
        A[0:256] = {"a": np.arange(256, dtype=np.int32)}
    frags, commits = os.path.join(path, "__fragments"), os.path.join(path, "__commits")
    (first,) = os.listdir(frags)
    version = first.split("_")[-1]
    src = os.path.join(frags, first)
    files = [(f, os.path.join(src, f)) for f in os.listdir(src)]
    for t in range(FIRST_TIMESTAMP_MS + 1, FIRST_TIMESTAMP_MS + n):
        name = f"__{t}_{t}_{uuid.uuid4().hex}_{version}"
        dst = os.path.join(frags, name)
        os.mkdir(dst)
        # ext4 allows 65,000 links to a file: then copy once and link to the copy
        fresh = os.stat(files[0][1]).st_nlink >= 60_000
        for f, full in files:
            (shutil.copy2 if fresh else os.link)(full, os.path.join(dst, f))
        if fresh:
            files = [(f, os.path.join(dst, f)) for f, _ in files]
        open(os.path.join(commits, name + ".wrt"), "wb").close()
    seen = len(tiledb.array_fragments(path))
    if seen != n:
        raise RuntimeError(f"{path}: tiledb-py sees {seen} fragments, not {n}")


def fragment_names(path: str) -> list[str]:
    """Fragment folders in timestamp order, as fragments/ lists them."""
    return sorted(os.listdir(os.path.join(path, "__fragments")), key=lambda s: (int(s.split("_")[2]), s))


def decoded_bytes(path: str) -> int:
    """Bytes of int32 values over all fragments of a one-attribute array, as `check` decodes them."""
    return 4 * sum(f.cell_num for f in tiledb.array_fragments(path))


def warm(path: str) -> None:
    """Read the backing files into the page cache: figures compare decoding, not the disk."""
    for dirpath, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


# ----------------------------------------------------------------------------- mounting

class Mount:
    """`tdbfs mount` as a user runs it (a background daemon), unmounted on exit."""

    def __init__(self, array: str, mnt: str, cache_mb: int, options=(), args=()):
        self.array, self.mnt, self.cache_mb, self.options = array, mnt, cache_mb, list(options)
        self.args = list(args)   # more of `tdbfs mount`'s own (--jobs 1)
        self.mount_s = None
        self._pid = None

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        cmd = TDBFS + ["mount", "--cache-mb", str(self.cache_mb)]
        for o in self.options:
            cmd += ["-o", o]
        cmd += self.args
        t = time.perf_counter()
        subprocess.run(cmd + [self.array, self.mnt], check=True, env=ENV, capture_output=True)
        self.mount_s = time.perf_counter() - t
        try:   # its CPU counts from here on in cpu_now(): the daemon is no child of ours (it detached)
            _DAEMONS.add(self.pid())
        except RuntimeError:
            pass
        return self

    def pid(self) -> int:
        if self._pid is None:
            self._pid = _daemon_pid(self.mnt)
        return self._pid

    def __exit__(self, *exc):
        try:
            pid = self.pid()
        except RuntimeError:
            pid = None
        if pid in _DAEMONS:   # its CPU up to now, before `tdbfs umount` (a process of its own) stops it
            _forget_daemon(pid)
        for _ in range(50):
            res = subprocess.run(TDBFS + ["umount", self.mnt], env=ENV, capture_output=True)
            if res.returncode == 0 or b"not mounted" in res.stderr:
                break
            time.sleep(0.1)
        else:
            subprocess.run(TDBFS + ["umount", "-z", self.mnt], env=ENV, capture_output=True)
        # the next mount on the same folder must not find this daemon still exiting
        for _ in range(100):
            if pid is None or not alive(pid):
                break
            time.sleep(0.05)
        return False


def _daemon_pid(mnt: str) -> int:
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        # a fork of `tdbfs mount ... MNT` (its argv), or `tdbfs.cli mount -f --spawned ... MNT` (mount/daemon_start.py)
        ours = mnt.encode() in args and b"tdbfs.cli" in args and b"mount" in args
        if ours and (b"--spawned" in args or b"-f" not in args):
            return int(p)
    raise RuntimeError("daemon not found")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


class TreePeak:
    """Peak RSS of processes and all their descendants: VmHWM of each process, sampled every
    `interval` s while they run, since a worker's high-water mark is lost when it exits. Also each
    one's own CPU seconds (cpu_s()), for processes nobody we wait for waits for (a fork server's workers)."""

    def __init__(self, roots: list[int], interval: float = 0.05):
        self.roots, self.interval = roots, interval
        self.peak_kib: dict[int, int] = {}
        self.cpu_first: dict[int, float] = {}   # own CPU s of the processes alive at the start
        self.cpu_last: dict[int, float] = {}    # own CPU s at the last sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.sample()
        self.cpu_first = dict(self.cpu_last)
        self._thread.start()
        return self

    def sample(self) -> None:
        for root in self.roots:
            for pid in [root, *descendants(root)]:
                hwm = status_kib(pid, "VmHWM")
                if hwm > self.peak_kib.get(pid, 0):
                    self.peak_kib[pid] = hwm
                cpu = own_cpu_s(pid)
                if cpu > self.cpu_last.get(pid, 0):
                    self.cpu_last[pid] = cpu

    def cpu_s(self, exclude=()) -> float:
        """Own CPU seconds of every process seen, since the start (the last sample's: what a process
        spent after it, as it exited, is missing)."""
        return sum(v - self.cpu_first.get(p, 0.0) for p, v in self.cpu_last.items() if p not in exclude)

    def _run(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False

    def mib(self, pids=None) -> float:
        return sum(v for p, v in self.peak_kib.items() if pids is None or p in pids) / 1024


def strace_opens(pid: int, action, pattern: str) -> tuple[int, list[str]]:
    """Run action() with strace on pid and count the files opened whose name matches pattern."""
    log = f"/tmp/tdbfs-bench-strace-{os.getpid()}.log"
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", log, "-p", str(pid)],
                              stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # strace attaches to every thread before it returns to work
    try:
        action()
    finally:
        tracer.terminate()
        tracer.wait()
    with open(log, errors="replace") as f:
        names = [os.path.basename(m.group(1)) for m in re.finditer(r'open(?:at)?\([^"]*"([^"]*)"', f.read())]
    os.unlink(log)
    hits = [n for n in names if re.fullmatch(pattern, n)]
    return len(hits), sorted(set(hits))


# ----------------------------------------------------------------------------- reading and timing

def cat(paths) -> float:
    t = time.perf_counter()
    for i in range(0, len(paths), 256):
        subprocess.run(["cat", *paths[i:i + 256]], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def tile_files(mnt: str, folders=("attrs/a0",)) -> list[str]:
    """Every tile_K.bin under the given folders of the first fragment, in tile order."""
    frag = sorted(os.listdir(os.path.join(mnt, "fragments")))[0]
    out = []
    for sub in folders:
        d = os.path.join(mnt, "fragments", frag, sub)
        n = sum(1 for x in os.listdir(d) if x.startswith("tile_") and x.endswith(".bin"))
        out += [os.path.join(d, f"tile_{k}.bin") for k in range(n)]
    return out


def first_line_s(cmd: list[str]) -> tuple[float, bytes]:
    """Seconds until cmd prints its first line (then it is stopped, as `| head -1` would)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    dt = time.perf_counter() - t
    p.kill()
    p.communicate()
    return dt, line


class Runs(dict):
    """What interleaved() returns: {case: [what each run returned]}, and in `cpu` {case: [CPU seconds of
    each run]} (see cpu_now)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.cpu: dict[str, list[float]] = {}


def interleaved(repeat: int, cases: dict) -> Runs:
    """Each case run `repeat` times in turns (A B A B ...), so both see the same machine. The CPU seconds
    of each run go to the result's `cpu`: those of the cpu_span()s the case ran (or report_cpu() gave),
    or else of the whole call."""
    out = Runs({name: [] for name in cases})
    out.cpu = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            _SPANS.append([])
            start = cpu_now()
            try:
                out[name].append(fn())
            finally:
                spans = _SPANS.pop()
            whole = cpu_now() - start
            out.cpu[name].append(sum(spans) if spans else whole)
    return out


# ----------------------------------------------------------------------------- CPU seconds

_TICK = os.sysconf("SC_CLK_TCK")
_DAEMONS: set[int] = set()      # daemons of the Mounts now open
_GONE = [0.0]                   # CPU seconds of the daemons of Mounts closed so far
_SPANS: list[list[float]] = []  # the CPU seconds of each cpu_span() of the interleaved run in progress


def own_cpu_s(pid: int) -> float:
    """User plus system seconds of process pid itself (all its threads), without its children; 0 once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def proc_cpu_s(pid: int) -> float:
    """User plus system seconds of process pid (all its threads) and of the children it has waited for
    (utime, stime, cutime, cstime of /proc/PID/stat); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _TICK   # fields 14-17 of proc(5), counted from 1 with pid


def tree_cpu_s(pid: int) -> float:
    """proc_cpu_s of pid and of every descendant alive now (one not yet waited for is in no cutime)."""
    return sum(proc_cpu_s(p) for p in [pid, *descendants(pid)])


def _forget_daemon(pid: int) -> None:
    _GONE[0] += tree_cpu_s(pid)
    _DAEMONS.discard(pid)


def cpu_now() -> float:
    """CPU seconds (user + system) spent so far by this process (every thread), by its children it has
    waited for (getrusage RUSAGE_CHILDREN: `cat`, `ls`, `tdbfs mount`, a fresh tiledb-py process, and
    their own waited-for children), and by the daemons of the Mounts it opened (read from /proc, since a
    daemon detaches and is nobody's waited-for child): differences of it are a case's CPU seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + _GONE[0]
            + sum(tree_cpu_s(p) for p in _DAEMONS))


@contextlib.contextmanager
def cpu_span():
    """Count only this part of an interleaved case's run as its CPU seconds (the part whose wall time
    the figure takes), e.g. the `cat`, not the mount before it; several spans of a run add up."""
    start = cpu_now()
    try:
        yield
    finally:
        report_cpu(cpu_now() - start)


def report_cpu(seconds: float) -> None:
    """CPU seconds measured elsewhere (a child that times its own part), counted as a cpu_span()."""
    if _SPANS:
        _SPANS[-1].append(seconds)


def fmt_cpu(xs, digits=2) -> str:
    """CPU seconds as fmt() gives wall times: median [min–max]."""
    return fmt(xs, digits=digits) if xs else ""


def cpu_cells(got: Runs, side, baseline=None, digits=2) -> dict:
    """The CPU columns of a row comparing case `side` against case `baseline` of one interleaved() run:
    row(..., **cpu_cells(got, "tdbfs", "tiledb"))."""
    out = {"cpu": fmt_cpu(got.cpu.get(side, []), digits)}
    if baseline is not None:
        out["baseline_cpu"] = fmt_cpu(got.cpu.get(baseline, []), digits)
    return out


def med(xs) -> float:
    return statistics.median(xs)


def fmt(xs, unit="", scale=1.0, digits=3) -> str:
    xs = [x * scale for x in xs]
    return f"{med(xs):.{digits}f}{unit} [{min(xs):.{digits}f}–{max(xs):.{digits}f}]"


def verdict(goal: str, met: bool) -> str:
    return f"{goal}: {'met' if met else 'not met'}"


IDLE = re.compile(r"(read|sigtimedwait|sigwait|epoll_wait|poll|select|pthread_cond_\w*wait|__futex\w*|futex\w*|"
                  r"do_futex_wait\w*|sem_\w*wait|0x[0-9a-f]+) \(")  # waiting, not working (and unnamed libc code)


def profile(pid: int, action, out: str) -> tuple[int, dict[str, int]]:
    """Run action() while py-spy samples the process pid with native frames; the collapsed stacks go
    to out. Returns the busy samples (a thread waiting in read, futex, sigwait is idle) and the
    busy samples of each frame (self time), most first."""
    spy = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "--pid", str(pid),
                            "--format", "raw", "--output", out, "--rate", "200", "--native"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches before the work starts
    try:
        action()
    finally:
        spy.send_signal(signal.SIGINT)
        err = spy.communicate(timeout=120)[1]
    if not os.path.exists(out):
        raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')[-300:]}")
    leaves: dict[str, int] = {}
    with open(out) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            leaf = stack.rsplit(";", 1)[-1]
            if not IDLE.match(leaf):
                leaves[leaf] = leaves.get(leaf, 0) + int(n)
    return sum(leaves.values()), dict(sorted(leaves.items(), key=lambda kv: -kv[1]))


KINDS = (("zstd", r"(ZSTD|HUF|FSE|BIT)_\w*|\w*zstd\w* \(|_mm_"), ("FUSE replies (writev)", r"writev "),
         ("file system calls", r"(open|openat|close|pread|fstat|fstatat|lseek|getdents)(64)? \("),
         ("memcpy", r"__memmove|__memcpy|memcpy|memmove"), ("Python: mfusepy", r"\S+ \(mfusepy"),
         ("Python: tdbfs", r"\S+ \(tdbfs/"), ("numpy", r"\S+ \(.*numpy"))


def kinds(top_all: dict[str, int]) -> list[tuple[str, int]]:
    """Busy samples by kind of work, the figure's explanation in one line."""
    out: dict[str, int] = {}
    for leaf, n in top_all.items():
        kind = next((k for k, rx in KINDS if re.match(rx, leaf)), "other")
        out[kind] = out.get(kind, 0) + n
    return sorted(out.items(), key=lambda kv: -kv[1])
