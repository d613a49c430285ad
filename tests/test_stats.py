"""stats.csv and array.yaml's hints through a real mount, read with cat, grep and stat."""

from __future__ import annotations

import csv
import io
import os
import subprocess

import tiledb
import yaml

import reference


def sh(*cmd) -> str:
    return subprocess.run(list(cmd), capture_output=True, timeout=120, check=True, text=True).stdout


def test_stats_csv_through_the_mount(sample_arrays, mount):
    built = sample_arrays["sparse_2d"]
    mnt = mount(built.path)
    text = sh("cat", str(mnt / "stats.csv"))
    assert os.stat(mnt / "stats.csv").st_size == len(text.encode())
    rows = list(csv.DictReader(io.StringIO(text)))
    # grep finds a field's total the way a user would
    (a1_total,) = [line for line in sh("grep", "^field_total,,a1,", str(mnt / "stats.csv")).splitlines()]
    a1 = next(r for r in rows if r["row"] == "field_total" and r["field"] == "a1")
    assert a1_total.split(",")[7:9] == [a1["stored_bytes"], a1["decoded_bytes"]]
    decoded = stored = 0
    for frag in reference.list_fragments(built.path):
        folder = mnt / "fragments" / frag / "attrs" / "a1"
        tiles = sorted(str(folder / n) for n in os.listdir(folder) if n.endswith(".bin"))
        decoded += len(subprocess.run(["cat", *tiles], capture_output=True, check=True, timeout=120).stdout)
        stored += sum(os.path.getsize(reference.fragment_path(built.path, frag) / n) for n in ("a1.tdb", "a1_var.tdb"))
        own = sh("cat", str(mnt / "fragments" / frag / "stats.csv")).splitlines()
        assert [line for line in own if line.startswith("field,")] == \
            [line for line in text.splitlines() if line.startswith(f"field,{frag},")]
    assert int(a1["decoded_bytes"]) == decoded
    assert int(a1["stored_bytes"]) == stored
    assert int(a1["cell_count"]) == sum(tiledb.FragmentInfoList(str(built.path)).cell_num)


def test_hints_through_the_mount(sample_arrays, mount):
    built = sample_arrays["sparse_2d"]
    mnt = mount(built.path)
    text = sh("cat", str(mnt / "array.yaml"))
    assert os.stat(mnt / "array.yaml").st_size == len(text.encode())
    doc = yaml.safe_load(text)
    assert list(doc)[-1] == "hints"
    by_name = {h["hint"]: h for h in doc["hints"]}
    assert by_name["format"]["says"].startswith("format 22: TileDB 2.25 or later")
    assert by_name["fragment_count"]["read_at_open"] == len(tiledb.FragmentInfoList(str(built.path)))
    assert "- hint: overlapping_fragments" in sh("grep", "hint: overlapping", str(mnt / "array.yaml"))
