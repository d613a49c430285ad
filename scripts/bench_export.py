"""Bench figure `export`: `tdbfs export ARRAY OUT.parquet` of the sparse array (what TileDB returns now, each
cell with its source), against tiledb-py reading the same cells and pyarrow writing them to Parquet, each
in a fresh process, interleaved. Cells per second (wall), CPU seconds and peak RSS of each side."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench_lib import ENV, fmt, interleaved, med, warm

#: run in a fresh process: the work, then (wall s, CPU s, peak RSS KiB, cells) as JSON on the last line. The
#: peak is VmHWM of the process's own memory: ru_maxrss keeps the forking parent's across exec
HWM = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])"
TDBFS_SIDE = """
import json, sys, time
from tdbfs.cli.main import main
t, c = time.perf_counter(), time.process_time()
code = main(["export", "--force", sys.argv[1], sys.argv[2]])
assert code == 0, code
wall, cpu = time.perf_counter() - t, time.process_time() - c
import pyarrow.parquet as pq
n = pq.ParquetFile(sys.argv[2]).metadata.num_rows
print(json.dumps([wall, cpu, HWM, n]))
""".replace("HWM", HWM)

TILEDB_SIDE = """
import json, sys, time
import tiledb, pyarrow as pa, pyarrow.parquet as pq
t, c = time.perf_counter(), time.process_time()
with tiledb.open(sys.argv[1]) as A:
    r = A.query(coords=True)[:]
pq.write_table(pa.table({k: v for k, v in r.items()}), sys.argv[2])
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps([wall, cpu, HWM, len(r["a"])]))
""".replace("HWM", HWM)


def _run(code: str, path: str, out: str) -> list:
    res = subprocess.run([sys.executable, "-c", code, path, out], capture_output=True, text=True, env=ENV,
                         check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def fig_export(args, work, arrays, row):
    print("export: the cells TileDB returns, to Parquet", flush=True)
    path = arrays["sparse"]
    warm(path)
    ours_out, theirs_out = os.path.join(work, "export_tdbfs.parquet"), os.path.join(work, "export_tiledb.parquet")
    got = interleaved(args.repeat, {"tdbfs": lambda: _run(TDBFS_SIDE, path, ours_out),
                                    "tiledb": lambda: _run(TILEDB_SIDE, path, theirs_out)})
    cells = {got["tdbfs"][0][3], got["tiledb"][0][3]}
    if len(cells) != 1:
        raise RuntimeError(f"export: tdbfs wrote {got['tdbfs'][0][3]} cells, tiledb-py read {got['tiledb'][0][3]}")
    n = cells.pop()
    rate = {k: [r[3] / r[0] / 1e6 for r in v] for k, v in got.items()}
    cpu = {k: [r[1] for r in v] for k, v in got.items()}
    rss = {k: [r[2] / 1024 for r in v] for k, v in got.items()}
    row(10, f"`tdbfs export` of {n:,} sparse cells (with fragment and tile) to Parquet, fresh process, "
        "Mcells/s", fmt(rate["tdbfs"]), f"tiledb-py read + pyarrow write_table {fmt(rate['tiledb'])}",
        f"{med(rate['tdbfs']) / med(rate['tiledb']):.2f}", "")
    row(10, "  the same: CPU s", fmt(cpu["tdbfs"], digits=2), fmt(cpu["tiledb"], digits=2),
        f"{med(cpu['tdbfs']) / med(cpu['tiledb']):.2f}", "")
    row(10, "  the same: peak RSS, MiB (tdbfs streams batches; tiledb-py holds every cell)",
        fmt(rss["tdbfs"], digits=0), fmt(rss["tiledb"], digits=0),
        f"{med(rss['tdbfs']) / med(rss['tiledb']):.2f}", "")
