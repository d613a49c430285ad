"""`scripts/bench --readme` rewrites only the table between the bench markers of README.md.

The bench itself is not run here (it is a benchmark); its table writer is, on fixed rows, against
a copy of the real README.md.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_table", ROOT / "scripts" / "bench_table.py")
bench_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_table)

INFO = dict(argv="--repeat 3", date="2026-11-24", cores=2, python="3.11.7", tiledb_py="0.36.1",
            tiledb="2.30.0", repeat=3)
ROWS = [
    dict(figure=1, what="dense: `cat` of every tile file of a0 (64 files, 256 MiB decoded), GB/s",
         value="0.700 [0.490–0.900]", cpu="0.61 [0.55–0.70]", baseline="tiledb-py, fresh process 0.450 [0.400–0.500]",
         baseline_cpu="0.80 [0.75–0.91]", ratio="1.56", goal="≥ 1.5: met"),
    dict(figure=4, what="`find MNT | wc -l`, 1,000 fragments, 59,025 lines, s", value="6.600 [6.400–6.800]",
         baseline="", ratio="112 µs per line", goal=""),
]


@pytest.fixture
def readme(tmp_path):
    copy = tmp_path / "README.md"
    copy.write_bytes((ROOT / "README.md").read_bytes())
    return copy


def _split(text: str):
    head, rest = text.split(bench_table.BEGIN)
    inside, tail = rest.split(bench_table.END)
    return head, inside, tail


def test_the_readme_has_the_markers_once_each_in_its_performance_section():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(bench_table.BEGIN) == 1 and text.count(bench_table.END) == 1
    head, _, _ = _split(text)
    assert head.rindex("\n## ") == head.index("\n## Performance\n")


def test_regeneration_replaces_the_table_and_nothing_else(readme):
    before = readme.read_text(encoding="utf-8")
    bench_table.write_readme_table(str(readme), ROWS, INFO)
    after = readme.read_text(encoding="utf-8")
    old_head, _, old_tail = _split(before)
    head, inside, tail = _split(after)
    assert (head, tail) == (old_head, old_tail)
    lines = inside.strip("\n").split("\n")
    assert lines[0] == ("Measured by `scripts/bench --repeat 3` on 2026-11-24: 2 cores, Python 3.11.7, "
                        "tiledb-py 0.36.1 (TileDB 2.30.0). Medians [min–max] of 3 runs; each ratio is of medians, "
                        "against a baseline taken in the same run, the two interleaved. CPU s: user plus system "
                        "seconds of every process the measured part ran (the bench, its children, the mount's "
                        "daemon), medians [min–max] of the same runs.")
    assert lines[1] == ""
    assert lines[2] == "| # | figure | tdbfs | CPU s | baseline | baseline CPU s | ratio | goal |"
    assert lines[3] == "|---|---|---|---|---|---|---|---|"
    assert lines[4] == ("| 1 | dense: `cat` of every tile file of a0 (64 files, 256 MiB decoded), GB/s | "
                        "0.700 [0.490–0.900] | 0.61 [0.55–0.70] | tiledb-py, fresh process 0.450 [0.400–0.500] | "
                        "0.80 [0.75–0.91] | 1.56 | ≥ 1.5: met |")
    # a | inside a cell would split the row into one more column; a row without CPU seconds (a run saved
    # before they were measured) gets empty cells there
    assert lines[5] == ("| 4 | `find MNT \\| wc -l`, 1,000 fragments, 59,025 lines, s | 6.600 [6.400–6.800] |  |  |  | "
                        "112 µs per line |  |")
    assert len(lines) == 6
    assert sorted(os.listdir(readme.parent)) == ["README.md"]  # the temporary file was renamed, not left


def test_regenerating_twice_gives_the_same_file_and_new_rows_replace_old_ones(readme):
    bench_table.write_readme_table(str(readme), ROWS, INFO)
    once = readme.read_bytes()
    bench_table.write_readme_table(str(readme), ROWS, INFO)
    assert readme.read_bytes() == once
    bench_table.write_readme_table(str(readme), ROWS[:1], dict(INFO, repeat=5))
    _, inside, _ = _split(readme.read_text(encoding="utf-8"))
    assert "of 5 runs" in inside and "of 3 runs" not in inside
    assert "`find MNT" not in inside and inside.count("\n| 1 | dense") == 1
    # a run saved before CPU seconds were measured: empty CPU cells, and the line does not speak of them
    bench_table.write_readme_table(str(readme), ROWS[1:], INFO)
    _, inside, _ = _split(readme.read_text(encoding="utf-8"))
    assert "two interleaved.\n" in inside and "CPU s:" not in inside.split("\n")[1]


@pytest.mark.parametrize("text", [
    "# t\n\n| old |\n",
    f"# t\n{bench_table.BEGIN}\n| old |\n",
    f"# t\n{bench_table.END}\n| old |\n{bench_table.BEGIN}\n",
    f"# t\n{bench_table.BEGIN}\n{bench_table.BEGIN}\n| old |\n{bench_table.END}\n",
])
def test_a_readme_without_one_pair_of_markers_in_order_is_left_untouched(tmp_path, text):
    readme = tmp_path / "README.md"
    readme.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="bench:"):
        bench_table.write_readme_table(str(readme), ROWS, INFO)
    assert readme.read_text(encoding="utf-8") == text
    assert sorted(os.listdir(tmp_path)) == ["README.md"]
