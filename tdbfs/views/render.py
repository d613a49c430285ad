"""Rendering plain data as the text formats of the tree: YAML, CSV, one-JSON-value-per-line text."""

from __future__ import annotations

import functools
import io
import json
import math
import re

from ..lazy import np
from ..text import shown
from .simple_yaml import simple_yaml


def plain(value):
    """Convert numpy scalars/arrays, bytes, tuples and dataclass-ish values to YAML-safe data."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown(str(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if np.imported() and isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if np.imported() and isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            text = raw.decode("utf-8")
            if text.isprintable():
                return text
        except UnicodeDecodeError:
            pass
        return "0x" + raw.hex()
    return value


@functools.lru_cache(maxsize=None)
def _dumper():
    """PyYAML's dumper with the tree's styles, made on first use (PyYAML costs a mount's
    start-up ~12 ms). libyaml's emitter when PyYAML was built with it (its wheels are): the
    YAML views of a tree walk spend most of their time emitting, and the C emitter is
    several times faster."""
    import yaml

    class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
        pass

    Dumper.add_representer(list, _represent_list)
    Dumper.add_representer(str, _represent_str)
    Dumper.add_representer(float, _represent_float)
    return yaml.dump, Dumper


def _represent_list(dumper, data):
    # Short lists of scalars (ranges, MBRs, offsets of a few fields) read best on one line.
    flow = len(data) <= 16 and all(not isinstance(v, (list, dict)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _represent_str(dumper, data):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _represent_float(dumper, data):
    if math.isnan(data):
        return dumper.represent_scalar("tag:yaml.org,2002:float", ".nan")
    if math.isinf(data):
        return dumper.represent_scalar("tag:yaml.org,2002:float", ".inf" if data > 0 else "-.inf")
    return dumper.represent_scalar("tag:yaml.org,2002:float", repr(data))


def to_yaml(data) -> bytes:
    data = plain(data)
    text = simple_yaml(data)  # no PyYAML import for footers and simple summaries (simple_yaml.py)
    if text is None:
        dump, dumper = _dumper()
        text = dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)
    return text.encode("utf-8")


def to_csv(header: list[str], rows) -> bytes:
    out = io.StringIO()
    out.write(",".join(_csv_cell(h) for h in header) + "\n")
    for row in rows:
        out.write(",".join(_csv_cell(v) for v in row) + "\n")
    return out.getvalue().encode("utf-8")


_NEEDS_QUOTES = re.compile(r'[,"\n\r]')


def _csv_cell(v) -> str:
    if type(v) is int:      # most cells of byte maps and tile tables: no quoting to look for
        return str(v)
    if v is None:
        return ""
    if type(v) is str:      # names and times: most cells of timeline.csv and stats.csv
        s = v if v.isascii() else shown(v)
        return '"' + s.replace('"', '""') + '"' if _NEEDS_QUOTES.search(s) else s
    if isinstance(v, (bytes, bytearray)):
        v = plain(v)
    if isinstance(v, float):
        return repr(v)
    s = shown(str(v))
    return '"' + s.replace('"', '""') + '"' if _NEEDS_QUOTES.search(s) else s


# -- tile cells as text: one JSON value per line --------------------------------

def _numbers_as_text(values: np.ndarray) -> np.ndarray:
    """Vectorised text of numeric values; NaN and infinities as JSON-ish tokens."""
    if values.dtype.kind == "f":
        text = values.astype(str)
        text = np.where(np.isnan(values), "NaN", text)
        text = np.where(np.isposinf(values), "Infinity", text)
        text = np.where(np.isneginf(values), "-Infinity", text)
        return text
    if values.dtype.kind == "b":
        return np.where(values, "true", "false")
    return values.astype(str)


def fixed_cells_text(values: np.ndarray, cell_val_num: int, is_string: bool, validity: np.ndarray | None) -> bytes:
    """Text of fixed-size cells: one line per cell; multi-value cells as JSON lists."""
    if is_string:
        raw = values.tobytes()
        n = len(values) // max(cell_val_num, 1)
        width = cell_val_num * values.dtype.itemsize
        lines = [json.dumps(raw[i * width:(i + 1) * width].decode("utf-8", errors="backslashreplace"))
                 for i in range(n)]
        lines = np.array(lines, dtype=object)
    else:
        text = _numbers_as_text(values)
        if cell_val_num > 1:
            n = len(values) // cell_val_num
            text = text[:n * cell_val_num].reshape(n, cell_val_num)
            lines = np.array(["[" + ", ".join(row) + "]" for row in text.tolist()], dtype=object)
        else:
            lines = text.astype(object)
    if validity is not None and len(validity) == len(lines):
        lines = np.where(validity == 0, "null", lines)
    return ("\n".join(lines.tolist()) + ("\n" if len(lines) else "")).encode("utf-8")


def var_cells_text(offsets: np.ndarray, data: bytes, dtype: np.dtype, is_string: bool, validity: np.ndarray | None,
                   end: int | None = None) -> bytes:
    """Text of var-sized cells from tile-relative offsets and the values bytes; `end`: where the last cell
    ends (default: the end of `data`), for a range of a tile's cells."""
    offsets = offsets.astype(np.int64)
    last = len(data) if end is None else end
    ends = np.concatenate([offsets[1:], np.array([last], np.int64)]) if len(offsets) else offsets
    lines = []
    for i, (s, e) in enumerate(zip(offsets.tolist(), ends.tolist())):
        if validity is not None and i < len(validity) and validity[i] == 0:
            lines.append("null")
            continue
        chunk = data[s:e]
        if is_string and dtype.itemsize == 1:
            lines.append(json.dumps(chunk.decode("utf-8", errors="backslashreplace")))
        else:
            vals = np.frombuffer(chunk[: len(chunk) - len(chunk) % dtype.itemsize], dtype)
            lines.append("[" + ", ".join(_numbers_as_text(vals).tolist()) + "]")
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
