"""Figure 9 `cells` of scripts/bench: cells as CSV at the size real tiles have (issue 38, items 2 and 3).

- `cells/tile_0.csv` of a 1M-cell sparse tile (d0, d1 int64; a int32, b float64, c int64) rendered in
  process from its decoded columns, against pyarrow's CSV writer (`pyarrow.csv.write_csv`) writing the
  same columns, interleaved; wall and CPU seconds (goal <= 2x);
- `ls -l` of that fragment's folder on a fresh mount (cells.csv's exact size; goal < 1 s);
- `cat` of the cells.csv of an 8M-cell dense tile with `--cache-mb 64`, per byte, against the same of a
  1M-cell dense tile (goal within 2x), and the daemon's peak RSS above its idle RSS (goal < 64 + 64 MiB).
"""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import tiledb

from bench_lib import Mount, fmt, interleaved, med, status_kib, verdict, warm


def make_sparse_tile(path: str, cells: int) -> None:
    rng = np.random.default_rng(12)
    dims = [tiledb.Dim(n, domain=(0, 1 << 30), tile=1 << 30, dtype=np.int64) for n in ("d0", "d1")]
    attrs = [tiledb.Attr("a", dtype=np.int32), tiledb.Attr("b", dtype=np.float64), tiledb.Attr("c", dtype=np.int64)]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, capacity=cells,
                                                 attrs=attrs, allows_duplicates=True))
    with tiledb.open(path, "w") as A:
        A[np.sort(rng.integers(0, 1 << 20, cells)), rng.integers(0, 1 << 30, cells)] = {
            "a": rng.integers(-(1 << 31), 1 << 31, cells).astype(np.int32),
            "b": rng.standard_normal(cells) * 1000, "c": rng.integers(0, 1 << 40, cells)}


def make_dense_tile(path: str, cells: int) -> None:
    rows = 1 << (cells.bit_length() // 2)
    cols = cells // rows
    dims = [tiledb.Dim("x", domain=(0, rows - 1), tile=rows, dtype=np.int64),
            tiledb.Dim("y", domain=(0, cols - 1), tile=cols, dtype=np.int64)]
    tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=False,
                                                 attrs=[tiledb.Attr("a", dtype=np.int32)]))
    with tiledb.open(path, "w") as A:
        A[:, :] = {"a": np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)}


def _array(work: str, name: str, make, cells: int) -> str:
    path = os.path.join(work, f"cells_{name}_{cells}")
    if not os.path.exists(path):
        t = time.perf_counter()
        make(path + ".part", cells)
        os.rename(path + ".part", path)
        print(f"  made {os.path.basename(path)} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def _timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def fig_cells(args, work, arrays, row=None):
    if row is None:
        from __main__ import row   # scripts/bench's
    print("9. cells", flush=True)
    import pyarrow as pa
    import pyarrow.csv as pcsv
    from tdbfs.store.open_array import open_array
    from tdbfs.store.tile_columns import tile_columns
    from tdbfs.views.cells_text import csv_rows

    cells = args.cells_mi << 20
    sparse = _array(work, "sparse", make_sparse_tile, cells)
    warm(sparse)
    store = open_array(sparse)
    frag = store.fragment(store.fragment_paths()[0])
    columns = tile_columns(frag, 0)   # decoded once: both sides start from the same numpy columns
    table = pa.table({c.name: c.values for c in columns})
    out = {}

    def ours():
        out["ours"] = len(csv_rows(columns))

    def arrow():
        sink = pa.BufferOutputStream()
        pcsv.write_csv(table, sink, pcsv.WriteOptions(include_header=False, quoting_style="none"))
        out["arrow"] = sink.tell()

    got = interleaved(args.repeat, {"ours": lambda: _timed(ours), "arrow": lambda: _timed(arrow)})
    wall, cpu = [w for w, _ in got["ours"]], [c for _, c in got["ours"]]
    awall, acpu = [w for w, _ in got["arrow"]], [c for _, c in got["arrow"]]
    ratio = med(cpu) / med(acpu)
    row(9, f"tile_0.csv of a {cells:,}-cell tile (2 dims, 3 attrs), {out['ours'] / 2**20:.0f} MiB, render s",
        f"{fmt(wall)}, CPU {fmt(cpu)}", f"pyarrow write_csv {fmt(awall)}, CPU {fmt(acpu)} ({out['arrow'] / 2**20:.0f} MiB)",
        f"{ratio:.2f}x CPU, {med(wall) / med(awall):.2f}x wall", verdict("≤ 2x", ratio <= 2))

    def ls_fragment():
        with Mount(sparse, os.path.join(work, "mnt"), args.cache_mb) as m:
            frag_dir = os.path.join(m.mnt, "fragments", os.listdir(os.path.join(m.mnt, "fragments"))[0])
            t = time.perf_counter()
            subprocess.run(["ls", "-l", frag_dir], check=True, capture_output=True)
            return time.perf_counter() - t

    times = [ls_fragment() for _ in range(args.repeat)]
    row(9, f"`ls -l` of the fragment folder of a {cells:,}-cell tile, fresh mount, s", fmt(times), "", "",
        verdict("< 1 s", med(times) < 1))

    big = args.cells_dense_mi << 20
    small = _array(work, "dense", make_dense_tile, cells)
    large = _array(work, "dense", make_dense_tile, big)

    def cat(path):
        with Mount(path, os.path.join(work, "mnt"), 64) as m:
            frag_dir = os.path.join(m.mnt, "fragments", os.listdir(os.path.join(m.mnt, "fragments"))[0])
            idle = status_kib(m.pid(), "VmRSS") / 1024
            target = os.path.join(frag_dir, "cells.csv")
            t = time.perf_counter()
            size = os.stat(target).st_size
            subprocess.run(["cat", target], check=True, stdout=subprocess.DEVNULL)
            dt = time.perf_counter() - t
            return dt / size, size, status_kib(m.pid(), "VmHWM") / 1024 - idle

    got = interleaved(args.repeat, {"small": lambda: cat(small), "large": lambda: cat(large)})
    per = {k: [g[0] for g in v] for k, v in got.items()}
    ratio = med(per["large"]) / med(per["small"])
    row(9, f"`cat cells.csv` of an {big:,}-cell dense tile ({got['large'][0][1] / 2**20:.0f} MiB), --cache-mb 64, ns/byte",
        fmt(per["large"], scale=1e9, digits=2), f"{cells:,} cells {fmt(per['small'], scale=1e9, digits=2)}",
        f"{ratio:.2f}x", verdict("≤ 2x", ratio <= 2))
    grown = max(g[2] for g in got["large"])
    row(9, "daemon peak RSS above idle during that `cat`, MiB", f"{grown:.0f}", "cache 64", "",
        verdict("< 128 (cache + 64)", grown < 128))
