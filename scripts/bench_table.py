"""The performance table that `scripts/bench` prints, writes to a file and puts into README.md.

No numpy, no tiledb: the README can be regenerated from a saved run (`scripts/bench --table-from`)
and tests/test_bench_table.py checks this module on its own.
"""

from __future__ import annotations

import os
import tempfile

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
COLUMNS = ("#", "figure", "tdbfs", "CPU s", "baseline", "baseline CPU s", "ratio", "goal")
#: a row's keys, column by column; "cpu" and "baseline_cpu" (CPU seconds of each side, scripts/bench_lib.py
#: cpu_now) may be missing: rows of a run saved before they were measured give empty cells
KEYS = ("figure", "what", "value", "cpu", "baseline", "baseline_cpu", "ratio", "goal")


def machine_line(info: dict, cpu: bool = True) -> str:
    """Where and how the figures were taken, the first line inside the markers; `cpu`: rows give CPU seconds."""
    command = " ".join(["scripts/bench", *info["argv"].split()])
    return (f"Measured by `{command}` on {info['date']}: {info['cores']} cores, "
            f"Python {info['python']}, tiledb-py {info['tiledb_py']} (TileDB {info['tiledb']}). "
            f"Medians [min–max] of {info['repeat']} runs; each ratio is of medians, against a baseline "
            f"taken in the same run, the two interleaved."
            + (" CPU s: user plus system seconds of every process the measured part ran (the bench, its "
               "children, the mount's daemon), medians [min–max] of the same runs." if cpu else ""))


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict], info: dict) -> str:
    cpu = any(r.get("cpu") or r.get("baseline_cpu") for r in rows)
    lines = [machine_line(info, cpu), "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r.get(k, "")) for k in KEYS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def replace_between_markers(text: str, block: str) -> str:
    """text with everything between the two marker lines replaced by block; the rest unchanged."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"README must hold {BEGIN} and {END} once each")
    if text.index(END) < text.index(BEGIN):
        raise ValueError(f"{END} comes before {BEGIN}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}{END}{tail}"


def write_readme_table(readme: str, rows: list[dict], info: dict) -> None:
    """Regenerate the table in place: a new file renamed over the old one, never a half-written README."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    new = replace_between_markers(text, markdown_table(rows, info))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(readme)), prefix=".README.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        os.chmod(tmp, os.stat(readme).st_mode & 0o7777)
        os.replace(tmp, readme)
    except BaseException:
        os.unlink(tmp)
        raise
