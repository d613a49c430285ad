"""A seeded hostile-bytes harness for the format layer.

Real inputs come from arrays written by TileDB (tiledb-py, tests/arrays.py), the
back-compat corpus of formats 1-22 and hand-built TileDB 0.x structures. Each
input is a `Target`: valid bytes plus the call that decodes them with the context
the store would give (schema, field, pipeline, filter context), so damaged bytes
reach the same parser entry points as in a mount. `run(targets, count, seed)`
damages them in seeded ways and reports every case where a parser did something
other than return or raise FormatError with an int offset, took too long, or
traced more memory than the bound.

Longer runs: `TDBFS_HOSTILE_CASES=20000 TDBFS_HOSTILE_SEED=7 pytest tests/format/test_hostile_bytes.py`
or `python tests/format/hostile.py 20000 7`.
"""

from __future__ import annotations

import gzip
import os
import random
import signal
import struct
import sys
import time
import tracemalloc
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tdbfs.format import array_metadata as am
from tdbfs.format import commits as cm
from tdbfs.format import consolidated_fragment_metadata as cfm
from tdbfs.format import fragment_metadata as fm
from tdbfs.format.array_metadata import parse_array_metadata
from tdbfs.format.enumeration import parse_enumeration
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile, read_generic_tile_envelope
from tdbfs.format.names import parse_fragment_name, parse_timestamped_name, try_parse_name
from tdbfs.format.schema import parse_schema
from tdbfs.format.tile import unfilter_tile
from tdbfs.format.legacy0x import book_keeping as zbk
from tdbfs.format.legacy0x import names as znames
from tdbfs.format.legacy0x import schema as zschema
from tdbfs.format.legacy0x.codecs import TileLayout, decode_tile
from tdbfs.views.describe import array_metadata as dam
from tdbfs.views.describe import commits as dcm
from tdbfs.views.describe import fragment_metadata as dfm
from tdbfs.views.describe import legacy0x as dzero
from tdbfs.views.describe.consolidated_fragment_metadata import describe_consolidated_fragment_metadata
from tdbfs.views.describe.enumeration import describe_enumeration
from tdbfs.views.describe.generic_tile import describe_generic_tile_envelope, describe_generic_tile_header
from tdbfs.views.describe.names import describe_fragment_name
from tdbfs.views.describe.schema import describe_schema

MEMORY_BOUND = 64 << 20
NET_PREFIX = "undecodable ("   # tdbfs.format.errors.safety_net
TIME_BOUND = 5.0
#: inputs larger than this are not damaged whole (their tiles are, one by one)
MAX_INPUT = 256 << 10
HUGE = (2**64 - 1, 2**63, 549_755_814_033, 2**32 - 1, 2**31, 2**40)


@dataclass(frozen=True)
class Target:
    name: str
    data: bytes
    call: Callable[[bytes], object]


# ---------------------------------------------------------------------------
# damage

def _flip(rng, b: bytearray) -> str:
    n = rng.randint(1, 8)
    for _ in range(n):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return f"flip {n} bits"


def _truncate(rng, b: bytearray) -> str:
    n = rng.randrange(len(b))
    del b[n:]
    return f"truncate at {n}"


def _huge(rng, b: bytearray) -> str:
    v = rng.choice(HUGE)
    width = rng.choice((8, 8, 4))
    v &= (1 << (8 * width)) - 1
    span = max(1, len(b) - width + 1)
    i = rng.randrange(span) if rng.random() < 0.5 else (rng.randrange(span) // width) * width
    b[i:i + width] = v.to_bytes(width, "little")
    return f"u{8 * width} {v} at {i}"


def _small(rng, b: bytearray) -> str:
    """A count-sized field set to a small but wrong value (0, 1, 255, len+1 ...)."""
    v = rng.choice((0, 1, 2, 7, 255, 256, 65535, len(b), len(b) + 1))
    width = rng.choice((8, 4, 1))
    i = rng.randrange(max(1, len(b) - width + 1))
    b[i:i + width] = (v & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    return f"u{8 * width} {v} at {i}"


def _swap(rng, b: bytearray) -> str:
    n = rng.randint(1, max(1, len(b) // 4))
    i, j = rng.randrange(max(1, len(b) - n)), rng.randrange(max(1, len(b) - n))
    a, c = bytes(b[i:i + n]), bytes(b[j:j + n])
    b[i:i + n], b[j:j + n] = c, a
    return f"swap {n} bytes at {i} and {j}"


def _zero(rng, b: bytearray) -> str:
    i = rng.randrange(len(b))
    n = rng.randint(1, min(64, len(b) - i))
    b[i:i + n] = bytes(n)
    return f"zero {n} at {i}"


def _garbage_range(rng, b: bytearray) -> str:
    i = rng.randrange(len(b))
    n = rng.randint(1, min(64, len(b) - i))
    b[i:i + n] = rng.randbytes(n)
    return f"garbage {n} at {i}"


def _garbage(rng, b: bytearray) -> str:
    n = rng.choice((0, 1, 7, 8, 33, len(b), 2 * len(b)))
    b[:] = rng.randbytes(n)
    return f"all garbage ({n} bytes)"


DAMAGES = (_flip, _truncate, _huge, _huge, _small, _swap, _zero, _garbage_range, _garbage)


def damage(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    if not b:
        b[:] = rng.randbytes(rng.randint(1, 64))
        return bytes(b), "garbage for empty input"
    steps = [rng.choice(DAMAGES)(rng, b) if b else "empty" for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    return bytes(b), "; ".join(steps)


# ---------------------------------------------------------------------------
# running one case

class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def check(target: Target, data: bytes, time_bound: float = TIME_BOUND, memory_bound: int = MEMORY_BOUND) -> str | None:
    """None if the parser behaved, else what it did wrong."""
    use_alarm = hasattr(signal, "setitimer") and _main_thread()
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, 4 * time_bound)
    tracemalloc.start()
    t0 = time.perf_counter()
    problem = None
    try:
        target.call(data)
    except FormatError as exc:
        if type(exc.offset) is not int:
            problem = f"FormatError with offset {exc.offset!r}: {exc}"
        elif not exc.message:
            problem = f"FormatError without a message: {exc}"
        elif exc.message.startswith(NET_PREFIX):
            # the parsers' last-resort conversion caught it: a check is missing at the source
            problem = f"caught by the safety net: {exc}"
    except _Timeout:
        problem = f"still running after {4 * time_bound} s"
    except RecursionError as exc:
        problem = f"RecursionError: {str(exc)[:200]}"
    except Exception as exc:  # noqa: BLE001 - the point is to catch what escapes
        problem = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    if problem is None and elapsed > time_bound:
        problem = f"took {elapsed:.2f} s"
    if problem is None and peak > memory_bound:
        problem = f"traced {peak / (1 << 20):.1f} MiB"
    return problem


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def run(targets: list[Target], count: int, seed: int = 0, stop_after: int | None = None) -> list[str]:
    """Damage targets round-robin for `count` cases; the failures, each with what reproduces it."""
    failures = []
    order = list(range(len(targets)))
    random.Random(f"order:{seed}").shuffle(order)
    for i in range(count):
        target = targets[order[i % len(order)]]
        rng = random.Random(f"{seed}:{i}")
        data, how = damage(target.data, rng)
        problem = check(target, data)
        if problem:
            failures.append(f"case {i} (seed {seed}) {target.name} [{how}]: {problem}")
            if stop_after and len(failures) >= stop_after:
                break
    return failures


def sweep_u64(targets: list[Target], value: int, limit: int | None = None, seed: int = 0) -> list[str]:
    """Every 8-byte window of every target set to `value`, one at a time (a seeded sample of
    `limit` of them when given): the fields that size things are u64s somewhere in there."""
    cases = [(t, at) for t in targets for at in range(len(t.data) - 7)]
    if limit is not None and len(cases) > limit:
        cases = random.Random(f"sweep:{seed}:{value}").sample(cases, limit)
    failures = []
    raw = value.to_bytes(8, "little")
    for t, at in cases:
        problem = check(t, t.data[:at] + raw + t.data[at + 8:])
        if problem:
            failures.append(f"{t.name} u64 {value} at {at}: {problem}")
    return failures


# ---------------------------------------------------------------------------
# targets from a TileDB array (format >= 1)

def _gtile_targets(tag: str, rel: str, data: bytes, offset: int, structure: str,
                   parse: Callable[[bytes], object] | None) -> list[Target]:
    """The tile's bytes (header, chunks and filters damaged) and, when it decodes, the payload alone."""
    out = []
    if offset:
        # only this tile's bytes, so that damage lands in it rather than in its neighbours
        try:
            end = read_generic_tile(data, offset, rel, structure).end
        except FormatError:
            return out
        data, offset = data[offset:end], 0
    if len(data) <= MAX_INPUT:
        if structure in ("schema", "legacy fragment metadata", "R-tree", "array metadata"):
            out.append(Target(f"{tag}:{rel}@{offset}:{structure} (envelope)", data,
                              lambda d, rel=rel, offset=offset, s=structure: describe_generic_tile_envelope(
                                  read_generic_tile_envelope(d, offset, rel, s))))

        def whole(d, rel=rel, offset=offset, structure=structure, parse=parse):
            tile = read_generic_tile(d, offset, rel, structure)
            describe_generic_tile_header(tile.header)
            if parse is not None:
                parse(tile.payload)
        out.append(Target(f"{tag}:{rel}@{offset}:{structure} (file)", data, whole))
    if parse is not None:
        try:
            payload = read_generic_tile(data, offset, rel, structure).payload
        except FormatError:
            return out
        if len(payload) <= MAX_INPUT:
            out.append(Target(f"{tag}:{rel}@{offset}:{structure} (payload)", payload, parse))
    return out


class _Array:
    """Just enough of an array's layout to give each structure its context. The harness reads
    files itself (not through tdbfs.store) so that it exercises the format layer alone."""

    def __init__(self, path: str):
        self.path = path
        self._schemas: dict = {}

    def files(self, rel: str) -> list[str]:
        d = os.path.join(self.path, rel)
        if not os.path.isdir(d):
            return []
        return sorted(f"{rel}/{n}" if rel else n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)))

    def dirs(self, rel: str) -> list[str]:
        d = os.path.join(self.path, rel)
        if not os.path.isdir(d):
            return []
        return sorted(f"{rel}/{n}" if rel else n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))

    def read(self, rel: str) -> bytes:
        with open(os.path.join(self.path, rel), "rb") as f:
            return f.read()

    def schema_files(self) -> list[str]:
        legacy = ["__array_schema.tdb"] if os.path.isfile(os.path.join(self.path, "__array_schema.tdb")) else []
        return legacy + self.files("__schema")

    def schema(self, rel: str):
        if rel not in self._schemas:
            self._schemas[rel] = parse_schema(read_generic_tile(self.read(rel), 0, rel, "schema").payload, rel)
        return self._schemas[rel]

    def schema_by_name(self, name: str):
        if name:
            return self.schema(f"__schema/{name}")
        files = self.schema_files()
        if "__array_schema.tdb" in files:
            return self.schema("__array_schema.tdb")
        return self.schema(max(files))

    def fragments(self) -> list[str]:
        out = self.dirs("__fragments")
        out += [d for d in self.dirs("") if d.startswith("__") and os.path.isfile(
            os.path.join(self.path, d, fm.FRAGMENT_METADATA_FILE))]
        return out


def array_targets(path: str, tag: str | None = None) -> list[Target]:
    """Every structure of the array at `path` that the format layer decodes, as targets."""
    tag = tag or os.path.basename(path)
    arr = _Array(path)
    out: list[Target] = []
    for rel in arr.schema_files():
        out += _gtile_targets(tag, rel, arr.read(rel), 0, "schema", lambda p, rel=rel: describe_schema(parse_schema(p, rel)))
    if not any(t.name.endswith("(payload)") for t in out):
        return out  # schemas TileDB refuses (pre-format, experimental): nothing else has context
    for rel in arr.files("__schema/__enumerations"):
        out += _gtile_targets(tag, rel, arr.read(rel), 0, "enumeration",
                              lambda p, rel=rel: describe_enumeration(parse_enumeration(p, rel)))
    for rel in arr.files("__meta"):
        if rel.endswith((".vac", ".ok")):
            continue
        out += _gtile_targets(tag, rel, arr.read(rel), 0, "array metadata",
                              lambda p, rel=rel: _metadata(p, rel))
    for rel in arr.files("__commits") + arr.files("__meta"):
        data = arr.read(rel)
        if rel.endswith(".con"):
            out.append(Target(f"{tag}:{rel}", data, lambda d, rel=rel: dcm.describe_consolidated_commits(cm.parse_consolidated_commits(d, rel))))
        elif rel.endswith(".vac"):
            out.append(Target(f"{tag}:{rel}", data, lambda d, rel=rel: cm.parse_vacuum_entries(d, rel)))
        elif rel.endswith(".ign"):
            out.append(Target(f"{tag}:{rel}", data, lambda d, rel=rel: cm.parse_ignore_entries(d, rel)))
        elif rel.endswith((".del", ".upd")):
            parse = cm.parse_delete_condition if rel.endswith(".del") else cm.parse_update_condition
            out += _gtile_targets(tag, rel, data, 0, "condition", lambda p, rel=rel, parse=parse: _condition(parse(p, rel)))
    for rel in arr.files("__fragment_meta"):
        if not rel.endswith(".meta"):
            continue
        data = arr.read(rel)
        out += _gtile_targets(tag, rel, data, 0, "consolidated fragment metadata",
                              lambda p, rel=rel: describe_consolidated_fragment_metadata(
                                  cfm.decode_consolidated_footers(p, rel, arr.schema_by_name)))
        payload = read_generic_tile(data, 0, rel, "consolidated fragment metadata").payload
        for e in cfm.parse_consolidated_fragment_metadata(payload, rel):
            schema = arr.schema_by_name(fm.peek_footer_schema_name(payload, rel, e.footer_offset)[1] or "")
            version = cfm._name_version(e.fragment_name)

            def footer(d, rel=rel, schema=schema, version=version):
                fm.peek_footer_schema_name(d, rel, 0)
                dfm.describe_footer(fm.parse_footer(d, rel, schema, 0, len(d), version))
            out.append(Target(f"{tag}:{rel}:footer of {e.fragment_name}", bytes(e.footer), footer))
    for frag in arr.fragments()[:3]:
        try:
            out += fragment_targets(arr, frag, tag)
        except Exception as exc:  # noqa: BLE001 - refused fragments (experimental versions) give no context
            print(f"hostile: no targets from {tag}:{frag}: {exc}", file=sys.stderr)
    return out


DATA, VAR, VALIDITY = "data", "var", "validity"
_SUFFIX = {DATA: ".tdb", VAR: "_var.tdb", VALIDITY: "_validity.tdb"}


def fragment_targets(arr: _Array, frag: str, tag: str) -> list[Target]:
    """The fragment's name, footer, metadata generic tiles and first and last data tiles.

    The context of each (schema, field, pipeline, filter context) is worked out
    like the store does (tdbfs/store/fragment.py), from the undamaged files."""
    from tdbfs.format.filters import EMPTY_PIPELINE
    from tdbfs.format.tile import UINT8, UINT64, FilterContext

    out: list[Target] = []
    name = frag.rsplit("/", 1)[-1]
    out.append(Target(f"{tag}:name {name}", name.encode(), _name_call))
    rel = f"{frag}/{fm.FRAGMENT_METADATA_FILE}"
    data = arr.read(rel)
    version = parse_fragment_name(name).assumed_format_version
    if version is not None and version <= 2:
        schema = arr.schema_by_name("")
        out += _gtile_targets(tag, rel, data, 0, "legacy fragment metadata",
                              lambda p: _legacy(fm.parse_legacy_fragment_metadata(p, rel, schema)))
        return out  # legacy data tiles are checked through the newer formats' code paths
    if version is not None and version >= 10:
        offset, length = fm.locate_footer(data, len(data), version, None, rel)
        schema = arr.schema_by_name(fm.peek_footer_schema_name(data, rel, offset)[1] or "")
    else:
        schema = arr.schema_by_name("")
        offset, length = fm.locate_footer(data, len(data), version, schema, rel)
    footer = fm.parse_footer(data, rel, schema, offset, length, version)

    def parse(d):
        if version is not None and version >= 10:
            at, n = fm.locate_footer(d, len(d), version, None, rel)
            fm.peek_footer_schema_name(d, rel, at)
        else:
            at, n = fm.locate_footer(d, len(d), version, schema, rel)
        dfm.describe_footer(fm.parse_footer(d, rel, schema, at, n, version))
    if len(data) <= MAX_INPUT:
        out.append(Target(f"{tag}:{rel}:footer", data, parse))
    if 0 < footer.offset < len(data):
        out.append(Target(f"{tag}:{rel}:footer only", data[footer.offset:], parse))
    fields = list(footer.fields)
    go = footer.generic_tile_offsets
    if len(data) > 64 << 20:
        return out
    out += _gtile_targets(tag, rel, data, go.rtree, "R-tree",
                          lambda p: _rtree(fm.parse_rtree(p, rel, schema.dimensions, footer.version)))
    few = lambda idx, n: idx == 0 or idx == n - 1  # noqa: E731 - the parsers are the same for every field
    for kind in ("tile_offsets", "tile_var_offsets", "tile_var_sizes", "tile_validity_offsets",
                 "tile_null_count_offsets"):
        offs = getattr(go, kind) or ()
        for idx, off in enumerate(offs):
            if few(idx, len(offs)):
                out += _gtile_targets(tag, rel, data, off, f"{kind}[{idx}]",
                                      lambda p, s=f"{kind}[{idx}]": fm.parse_u64_list(p, rel, s))
    for which in ("min", "max"):
        offs = getattr(go, f"tile_{which}_offsets") or ()
        for idx, off in enumerate(offs):
            if idx < len(fields) and few(idx, len(offs)):
                out += _gtile_targets(tag, rel, data, off, f"tile_{which}[{idx}]",
                                      lambda p, f=fields[idx], w=which: fm.parse_tile_min_max(
                                          p, rel, f, "tile mins" if w == "min" else "tile maxes"))
    offs = go.tile_sum_offsets or ()
    for idx, off in enumerate(offs):
        if idx < len(fields) and few(idx, len(offs)):
            out += _gtile_targets(tag, rel, data, off, f"tile_sums[{idx}]",
                                  lambda p, f=fields[idx]: fm.parse_tile_sums(p, rel, f))
    if go.fragment_min_max_sum_null_count is not None:
        out += _gtile_targets(tag, rel, data, go.fragment_min_max_sum_null_count, "fragment mmsn",
                              lambda p: dfm.describe_fragment_summary(fm.parse_fragment_min_max_sum_null_count(p, rel, fields), fields))
    if go.processed_conditions is not None:
        out += _gtile_targets(tag, rel, data, go.processed_conditions, "processed conditions",
                              lambda p: fm.parse_processed_conditions(p, rel))
    if data[29:30] == b"\x01":
        return out  # encrypted: data tiles need the key

    def lst(kind, idx):
        return fm.parse_u64_list(read_generic_tile(data, getattr(go, kind)[idx], rel, kind).payload, rel, kind)

    def pipeline(field, stream):
        if stream == VALIDITY:
            return schema.validity_filters or EMPTY_PIPELINE
        if stream == DATA and field.var_sized:
            return schema.offsets_filters
        if field.kind == fm.ATTRIBUTE:
            return schema.attributes[field.position].filters
        if field.kind == fm.DIMENSION:
            own = schema.dimensions[field.position].filters
            return own if own.filters else schema.coords_filters
        return schema.coords_filters

    def embedded(field):
        if not field.var_sized or field.kind not in (fm.ATTRIBUTE, fm.DIMENSION):
            return False
        pipe = pipeline(field, VAR)
        first = pipe.filters[0].id if pipe.filters else None
        if field.datatype.name == "STRING_ASCII":
            return (first == 4 and footer.version >= 12) or (first == 14 and footer.version >= 13)
        if field.datatype.name == "STRING_UTF8":
            return first in (4, 14) and footer.version >= 17
        return False

    def context(field, stream, cells):
        if stream == VALIDITY:
            return FilterContext(UINT8, 1, footer.version)
        if stream == DATA and field.var_sized:
            return FilterContext(UINT64, 8, footer.version)
        if stream == VAR:
            strings = embedded(field)
            return FilterContext(field.datatype, field.datatype.size, footer.version, var_strings=strings,
                                 cell_num=cells if strings else None)
        return FilterContext(field.datatype, field.cell_size, footer.version)

    if footer.dense:
        per_tile = 1
        for d in schema.dimensions:
            per_tile *= int(d.tile_extent)
    stored = [f for f in fields if not (f.kind == fm.COORDS and (footer.version >= 5 or footer.dense))
              and not (f.kind == fm.DIMENSION and footer.dense)]
    for field in stored:
        for stream in (DATA, VAR, VALIDITY):
            if (stream == VAR and not field.var_sized) or (stream == VALIDITY and not field.nullable) \
                    or (stream == DATA and embedded(field)):
                continue
            kind = {DATA: "tile_offsets", VAR: "tile_var_offsets", VALIDITY: "tile_validity_offsets"}[stream]
            try:
                offsets = lst(kind, field.idx)
                n = len(offsets)
                sizes = {DATA: footer.file_sizes, VAR: footer.file_var_sizes,
                         VALIDITY: footer.file_validity_sizes}[stream]
                for k in sorted({0, n - 1} - {-1}):
                    cells = per_tile if footer.dense else (
                        footer.last_tile_cell_num if k == footer.sparse_tile_num - 1 else schema.capacity)
                    if stream == VAR:
                        expected = int(lst("tile_var_sizes", field.idx)[k])
                    elif stream == VALIDITY:
                        expected = cells
                    else:
                        expected = cells * (8 if field.var_sized else field.cell_size)
                    start = int(offsets[k])
                    end = int(offsets[k + 1]) if k + 1 < n else int(sizes[field.idx])
                    file = f"{frag}/{field.stem}{_SUFFIX[stream]}"
                    with open(os.path.join(arr.path, file), "rb") as fh:
                        fh.seek(start)
                        raw = fh.read(end - start)
                    pipe, ctx = pipeline(field, stream), context(field, stream, cells)

                    def decode(d, file=file, start=start, pipe=pipe, ctx=ctx, k=k, expected=expected):
                        unfilter_tile(d, file, start, pipe, ctx, f"tile {k}", expected_size=expected, base=start)
                    decode(raw)
                    if len(raw) <= MAX_INPUT:
                        out.append(Target(f"{tag}:{file}:tile {k} {stream} ({'+'.join(pipe.names) or 'no filters'})",
                                          raw, decode))
            except Exception as exc:  # noqa: BLE001 - a tile whose context this harness gets wrong
                print(f"hostile: no tile targets for {tag}:{frag} {field.stem} {stream}: {exc}", file=sys.stderr)
    return out


def _condition(commit):
    """What the views show of a condition: text and plain data, with and without field types."""
    from tdbfs.format.datatypes import DATATYPES
    dcm.describe_condition_commit(commit)
    types = {}
    if commit.condition is not None:
        # every field named in the condition typed as each datatype in turn (values decode by type)
        for dt in list(DATATYPES.values())[::7]:
            types = {n: dt for n in _fields(commit.condition)}
            cm.condition_to_text(commit.condition, types)
            dcm.describe_condition_commit(commit, types)


def _fields(node) -> set:
    if hasattr(node, "children"):
        return set().union(*(_fields(c) for c in node.children)) if node.children else set()
    return {node.field}


def _metadata(payload, rel):
    records = parse_array_metadata(payload, rel)
    for r in records:
        dam.describe_metadata_record(r)
    dam.describe_merged_metadata(am.merge_metadata([(rel, records)]))


def _legacy(meta):
    dfm.describe_legacy_footer(meta, True)
    dfm.describe_legacy_footer(meta, False)


def _rtree(tree):
    for level in range(len(tree.levels)):
        dfm.describe_rtree_level(tree, level)


def _name_call(d: bytes):
    name = d.decode("utf-8", "surrogateescape")
    try_parse_name(name)
    for fn in (parse_fragment_name, parse_timestamped_name):
        try:
            describe_fragment_name(fn(name))
        except FormatError as exc:
            if type(exc.offset) is not int:
                raise


# ---------------------------------------------------------------------------
# TileDB 0.x structures, built by hand after docs/format-0x.md

def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<i", len(raw)) + raw


def legacy0x_schema_bytes(dense: bool = False, versioned: bool = False) -> bytes:
    out = _s("/ws/arr") + struct.pack("<Bbbq", int(dense), 0, 0, 4)
    out += struct.pack("<i", 2) + _s("a1") + _s("a2") + struct.pack("<i", 2) + _s("d1") + _s("d2")
    dom = struct.pack("<4q", 0, 3, 0, 7)
    out += struct.pack("<i", len(dom)) + dom
    ext = struct.pack("<2q", 2, 4) if dense else b""
    out += struct.pack("<i", len(ext)) + ext
    out += bytes([0, 4, 1]) + struct.pack("<2i", 1, 0x7FFFFFFF) + bytes((1, 0, 2))
    if versioned:
        out = (struct.pack("<I", 0xFFFFFFFF - 2) + _s("") + out + struct.pack("<3b", -1, 0, 1)
               + bytes((0, 3)) + struct.pack("<2b", 0, 1))
    return out


def legacy0x_book_keeping_bytes() -> bytes:
    q = lambda *v: struct.pack(f"<{len(v)}q", *v)  # noqa: E731
    out = q(32) + q(0, 3, 0, 7)
    out += q(2) + q(0, 1, 0, 5) + q(2, 3, 2, 7)
    out += q(2) + q(0, 0, 1, 5) + q(2, 7, 3, 2)
    out += q(2, 0, 16) + q(2, 0, 19) + q(2, 0, 17)
    out += q(0) + q(2, 0, 15)
    out += q(0) + q(2, 7, 2)
    out += q(2)
    return out


def legacy0x_targets() -> list[Target]:
    import lz4.block
    import numpy as np
    import zstandard

    out = []
    for dense in (False, True):
        for versioned in (False, True):
            raw = legacy0x_schema_bytes(dense, versioned)
            out.append(Target(f"zero:schema dense={dense} versioned={versioned}", raw,
                              lambda d: dzero.describe_legacy0x_schema(zschema.parse_schema(d, "__array_schema.tdb"))))
    schema = zschema.parse_schema(legacy0x_schema_bytes())
    bk = legacy0x_book_keeping_bytes()
    # damage both the gzip stream and what it holds
    out.append(Target("zero:book-keeping (gzip)", gzip.compress(bk),
                      lambda d: dzero.describe_book_keeping(zbk.parse_book_keeping(d, "f/__book_keeping.tdb.gz", schema), schema)))
    out.append(Target("zero:book-keeping (stream)", bk,
                      lambda d: dzero.describe_book_keeping(zbk.parse_book_keeping(gzip.compress(d, 1), "f/__book_keeping.tdb.gz", schema), schema)))
    out.append(Target("zero:name", b"__0123456789abcdef_1492000000000",
                      lambda d: _legacy0x_name(d)))
    values = (np.arange(64, dtype="<i4") // 3).tobytes()
    layout = TileLayout(np.dtype("<i4"), 1, 4, 4)
    runs = b"".join(struct.pack("<i", v) + struct.pack(">H", 3) for v in range(21)) + struct.pack("<i", 21) + b"\x00\x01"
    streams = {
        "GZIP": (1, zlib.compress(values)),
        "ZSTD": (2, zstandard.ZstdCompressor().compress(values)),
        "LZ4": (3, lz4.block.compress(values, store_size=False)),
        "RLE": (10, runs),
    }
    try:
        import blosc  # noqa: F401
        streams["BLOSC"] = (4, blosc.compress(values, typesize=4))
    except ImportError:
        pass
    for name, (comp, stream) in streams.items():
        codec = zschema.Codec(comp, -1)
        for extra, label in ((0, ""), (0x10, "+DELTA"), (0x20, "+BITSHUFFLE")):
            c = zschema.Codec(comp | extra, -1)
            try:
                decode_tile(stream, c, layout, len(values), "a.tdb", 0, "tile 0")
            except FormatError:
                if extra:
                    continue
            out.append(Target(f"zero:tile {name}{label}", stream,
                              lambda d, c=c: decode_tile(d, c, layout, len(values), "a.tdb", 0, "tile 0")))
        # the size the book-keeping claims, damaged instead of the stream
        out.append(Target(f"zero:tile {name} huge out_len", stream,
                          lambda d, c=codec, s=stream: decode_tile(
                              s, c, layout, int.from_bytes(d[:8].ljust(8, b"\0"), "little"), "a.tdb", 0, "tile 0")))
    return out


def _legacy0x_name(d: bytes):
    try:
        dzero.describe_legacy0x_name(znames.parse_fragment_name(d.decode("utf-8", "surrogateescape")))
    except FormatError as exc:
        if type(exc.offset) is not int:
            raise


# ---------------------------------------------------------------------------
# the corpus

#: (name, kind, options) of the arrays written with tiledb-py for the harness
GENERATED = (
    ("f_zstd_sparse", "filters", dict(filter="ZSTD")),
    ("f_gzip_dense", "filters", dict(filter="GZIP", sparse=False)),
    ("f_lz4", "filters", dict(filter="LZ4")),
    ("f_bzip2", "filters", dict(filter="BZIP2")),
    ("f_chain", "filters", dict(filter="BYTESHUFFLE+ZSTD+CHECKSUM_SHA256")),
    ("f_md5", "filters", dict(filter="CHECKSUM_MD5")),
    ("f_bitshuffle", "filters", dict(filter="BITSHUFFLE")),
    ("f_xor", "filters", dict(filter="XOR")),
    ("var_strings", "var_strings", dict(cells=60, capacity=25)),
    ("all_dtypes", "all_dtypes", dict(sparse=True)),
    ("dense_2d", "dense", dict(ndim=2)),
    ("deletes", "deletes", dict()),
    ("commits", "commits", dict()),
    ("fragment_meta", "fragment_meta", dict(vacuum_after=True)),
    ("consolidated", "consolidated", dict(sparse=True, vacuum_after=True, fragment_meta=True)),
    ("enumerations", "enumerations", dict()),
    ("metadata", "metadata", dict(consolidate_meta=True, vacuum_meta=True)),
    ("dim_labels", "dim_labels", dict()),
)


#: attribute dtype -> filter chains TileDB accepts on it (those of GENERATED's "filters" arrays
#: need every type of the "filters" profile to take the filter)
TYPED_FILTERS = {
    "int64": ("DOUBLE_DELTA", "DELTA", "BIT_WIDTH_REDUCTION+ZSTD", "POSITIVE_DELTA", "DOUBLE_DELTA_AS_INT32",
              "DELTA_AS_UINT16", "XOR+BITSHUFFLE+CHECKSUM_MD5", "BIT_WIDTH_REDUCTION_W64"),
    "int16": ("BIT_WIDTH_REDUCTION", "POSITIVE_DELTA_W64", "DOUBLE_DELTA+GZIP"),
    "float64": ("SCALE_FLOAT", "SCALE_FLOAT_W2", "SCALE_FLOAT_W8+LZ4"),
    "datetime64[ms]": ("DOUBLE_DELTA", "DELTA", "BIT_WIDTH_REDUCTION"),
}


def build_typed_filters(path: Path) -> str:
    """A sparse array with one attribute per (type, filter chain) of TYPED_FILTERS, 40 cells, capacity 16."""
    import numpy as np
    import tiledb

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import arrays

    attrs, values = [], {}
    n = 40
    rng = np.random.default_rng(3)
    for t, chains in TYPED_FILTERS.items():
        for j, chain in enumerate(chains):
            name = f"{t.split('[')[0]}_{j}"
            attrs.append(tiledb.Attr(name, dtype=np.dtype(t), filters=arrays.filter_list(chain)))
            if t == "float64":
                v = np.cumsum(rng.normal(0, 1, n)).round(2)
            elif t.startswith("datetime"):
                v = (1_600_000_000_000 + np.cumsum(rng.integers(0, 1000, n))).astype(t)
            else:
                v = np.cumsum(rng.integers(0, 60, n)).astype(t)  # sorted: POSITIVE_DELTA refuses the rest
            values[name] = v
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 999), tile=100, dtype=np.int64))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=attrs, sparse=True, capacity=16,
                                                      coords_filters=arrays.filter_list("DOUBLE_DELTA+ZSTD")))
    with tiledb.open(str(path), "w") as A:
        A[np.arange(n) * 7] = values
    return str(path)


def backcompat_root() -> str | None:
    repo = Path(__file__).resolve().parents[2]
    for cand in (repo / "tests" / "data" / "backcompat_arrays",
                 Path(os.environ.get("TDBFS_BACKCOMPAT_ARRAYS", "/nonexistent"))):
        if cand.is_dir():
            return str(cand)
    return None


def build_targets(workdir: str | os.PathLike) -> list[Target]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import arrays  # tests/arrays.py

    out: list[Target] = []
    for name, kind, opts in GENERATED:
        try:
            built = arrays.make_array(Path(workdir), kind, name=name, **opts)
        except Exception as exc:  # noqa: BLE001 - a builder this tiledb-py cannot run
            print(f"hostile: skipped {name}: {exc}", file=sys.stderr)
            continue
        out += array_targets(str(built.path), name)
    try:
        out += array_targets(build_typed_filters(Path(workdir) / "typed_filters"), "typed_filters")
    except Exception as exc:  # noqa: BLE001
        print(f"hostile: skipped typed_filters: {exc}", file=sys.stderr)
    root = backcompat_root()
    if root:
        for folder in sorted(os.listdir(root)):
            base = os.path.join(root, folder)
            if not os.path.isdir(base):
                continue
            for arr in sorted(os.listdir(base)):
                path = os.path.join(base, arr)
                if os.path.isdir(path):
                    try:
                        out += array_targets(path, folder)
                    except Exception as exc:  # noqa: BLE001 - refused arrays (pre-format, experimental)
                        print(f"hostile: no targets from {folder}: {exc}", file=sys.stderr)
    out += legacy0x_targets()
    return out


def main(argv: list[str]) -> int:
    import tempfile

    count = int(argv[1]) if len(argv) > 1 else 2000
    seed = int(argv[2]) if len(argv) > 2 else 0
    with tempfile.TemporaryDirectory() as tmp:
        targets = build_targets(tmp)
        print(f"{len(targets)} targets, {count} cases, seed {seed}", file=sys.stderr)
        failures = run(targets, count, seed)
    for f in failures:
        print(f)
    print(f"{len(failures)} failures", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
