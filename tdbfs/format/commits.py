"""Commit-side files (docs/format.md §7.3-§7.5): `.vac`, `.ign`, `.con`, and `.del`/`.upd` conditions.

* `.vac`  text, one URI per line: what a consolidation made obsolete (§7.4).
* `.ign`  text, one relative URI per line: markers inside `.con` files to ignore (§7.3).
* `.con`  per entry a marker path + `\\n`; a `.del` entry is followed by `u64 size` and the
  complete bytes of that `.del` file (a generic tile) (§7.3).
* `.del` / `.upd` generic tile payload: a pre-order query-condition tree (the **negation**
  of the user's condition; `.upd` appends the update values) (§7.5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .cursor import Cursor
from .datatypes import Datatype
from .errors import FormatError
from .errors import safety_net
from .schema import decode_value, plain

# ---------------------------------------------------------------------------
# text files


@dataclass(frozen=True)
class TextEntry:
    """One line of a `.vac` or `.ign` file."""

    line: str          # as written (without the newline)
    path: str          # normalised path relative to the array root (no leading '/')
    offset: int        # byte offset of the line in the file


def _lines(data, file: str, structure: str):
    """(offset, text) per `\\n`-terminated line, like std::getline (a last line without `\\n` counts)."""
    data = bytes(data)
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            end = len(data)
        raw = data[pos:end]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(file, structure, pos + e.start, "line is not valid UTF-8") from None
        yield pos, text
        pos = end + 1


def normalize_vacuum_path(line: str) -> str:
    """A `.vac` line as a path relative to the array root (ArrayDirectory::get_full_vac_uri).

    Keeps the part from `__fragments` onward, else from `__meta` onward, else
    the last path component (pre-v12 fragments lived at the array root).
    """
    for marker in ("__fragments", "__meta"):
        at = line.find(marker)
        if at >= 0:
            return line[at:].rstrip("/")
    return line.rstrip("/").rsplit("/", 1)[-1]


@safety_net("vacuum file")
def parse_vacuum_entries(data, file: str) -> list[TextEntry]:
    """Entries of a `.vac` file with their lines and offsets; empty lines are skipped."""
    out = []
    for pos, text in _lines(data, file, "vacuum file"):
        if text:
            out.append(TextEntry(text, normalize_vacuum_path(text), pos))
    return out


def parse_vacuum_file(data, file: str) -> list[str]:
    """A `.vac` file as paths relative to the array root (`__fragments/…`, `__meta/…`, or a root name)."""
    return [e.path for e in parse_vacuum_entries(data, file)]


@safety_net("ignore file")
def parse_ignore_entries(data, file: str) -> list[TextEntry]:
    """Entries of a `.ign` file (URIs relative to the array URI); empty lines are skipped."""
    return [TextEntry(text, text.lstrip("/"), pos)
            for pos, text in _lines(data, file, "ignore file") if text]


def parse_ignore_file(data, file: str) -> list[str]:
    """A `.ign` file as marker paths relative to the array root (e.g. `__commits/__…_22.wrt`)."""
    return [e.path for e in parse_ignore_entries(data, file)]


@dataclass(frozen=True)
class ConsolidatedCommit:
    """One entry of a `.con` file."""

    line: str                      # marker path as written (relative to the array URI)
    path: str                      # normalised: no leading '/'
    kind: str                      # marker extension without the dot: wrt, del, upd, ok, ... ("" if none)
    offset: int                    # byte offset of the line in the .con file
    embedded_offset: int | None = None   # .del only: offset in the .con file of the embedded .del bytes
    embedded_size: int | None = None
    embedded: bytes | None = None        # .del only: the embedded .del file (a generic tile)


@dataclass(frozen=True)
class ConsolidatedCommits:
    """A decoded `.con` file (iterable over its entries)."""

    entries: tuple[ConsolidatedCommit, ...]

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i):
        return self.entries[i]


@safety_net("consolidated commits")
def parse_consolidated_commits(data, file: str) -> ConsolidatedCommits:
    """Entries of a `.con` file, with the `.del` files embedded after their lines."""
    data = bytes(data)
    out = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            end = len(data)
        raw = data[pos:end]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(file, "consolidated commits entry", pos + e.start,
                              "marker path is not valid UTF-8") from None
        start, pos = pos, end + 1
        if not line:
            continue
        name = line.rsplit("/", 1)[-1]
        kind = name.rsplit(".", 1)[1] if "." in name else ""
        if kind == "del":
            cur = Cursor(data, file, f"consolidated commits entry {line!r}", pos=min(pos, len(data)))
            size = cur.u64("embedded .del size")
            at = cur.pos
            blob = cur.bytes(size, "embedded .del file")
            pos = cur.pos
            out.append(ConsolidatedCommit(line, line.lstrip("/"), kind, start, at, size, blob))
        else:
            out.append(ConsolidatedCommit(line, line.lstrip("/"), kind, start))
    return ConsolidatedCommits(tuple(out))


# ---------------------------------------------------------------------------
# delete / update conditions

OPS = {0: "LT", 1: "LE", 2: "GT", 3: "GE", 4: "EQ", 5: "NE", 6: "IN", 7: "NOT_IN",
       253: "ALWAYS_TRUE", 254: "ALWAYS_FALSE"}
OP_SYMBOLS = {0: "<", 1: "<=", 2: ">", 3: ">=", 4: "=", 5: "<>"}
COMBINATION_OPS = {0: "AND", 1: "OR", 2: "NOT"}
NODE_EXPRESSION, NODE_VALUE = 0, 1
MAX_DEPTH = 128     # TileDB's trees are shallow; this bounds Python recursion


@dataclass(frozen=True)
class ConditionValue:
    """A leaf: `field op value` (IN / NOT_IN: value holds the members, split by `offsets`)."""

    op: int
    field: str
    value: bytes
    offsets: tuple[int, ...] | None = None   # IN / NOT_IN: start of each member in `value`
    offset: int = 0                          # payload offset of the node

    @property
    def op_name(self) -> str:
        return OPS.get(self.op, f"UNKNOWN({self.op})")

    @property
    def members(self) -> list[bytes]:
        if self.offsets is None:
            return [self.value]
        bounds = list(self.offsets) + [len(self.value)]
        return [self.value[bounds[i]:bounds[i + 1]] for i in range(len(self.offsets))]


@dataclass(frozen=True)
class ConditionExpression:
    combination_op: int
    children: tuple
    offset: int = 0

    @property
    def op_name(self) -> str:
        return COMBINATION_OPS.get(self.combination_op, f"UNKNOWN({self.combination_op})")


ConditionNode = ConditionValue | ConditionExpression


@dataclass(frozen=True)
class UpdateValue:
    field: str
    value: bytes
    offset: int = 0


@dataclass(frozen=True)
class ConditionCommit:
    """A decoded `.del` or `.upd` payload."""

    condition: ConditionNode | None     # None for an empty payload (no condition)
    update_values: tuple[UpdateValue, ...] = ()
    is_update: bool = False
    trailing_bytes: int = 0


def _parse_node(cur: Cursor, depth: int) -> ConditionNode:
    if depth > MAX_DEPTH:
        raise cur.error(f"condition tree deeper than {MAX_DEPTH} levels")
    start = cur.pos
    node_type = cur.u8("node type")
    if node_type == NODE_VALUE:
        at = cur.pos
        op = cur.u8("condition op")
        if op not in OPS:
            raise cur.error(f"unknown condition op {op}", offset=at)
        field = cur.string(cur.u32("field name length"), "field name")
        value = cur.bytes(cur.u64("value length"), "value")
        offsets = None
        if op in (6, 7):
            olen = cur.u64("offsets length")
            at = cur.pos
            raw = cur.bytes(olen, "offsets")
            if olen % 8:
                raise cur.error(f"offsets length {olen} is not a multiple of 8", offset=at - 8)
            offsets = tuple(int(x) for x in np.frombuffer(raw, "<u8"))
            prev = 0
            for i, off in enumerate(offsets):
                if off < prev or off > len(value):
                    raise cur.error(f"set member offset {i} = {off} is out of order or beyond the "
                                    f"{len(value)} value bytes", offset=at + 8 * i)
                prev = off
        return ConditionValue(op, field, value, offsets, start)
    if node_type == NODE_EXPRESSION:
        at = cur.pos
        combo = cur.u8("combination op")
        if combo not in COMBINATION_OPS:
            raise cur.error(f"unknown combination op {combo}", offset=at)
        n = cur.u64_count(10, "children count", "children")
        children = []
        for _ in range(n):
            children.append(_parse_node(cur, depth + 1))
        return ConditionExpression(combo, tuple(children), start)
    raise cur.error(f"unknown node type {node_type} (0 expression, 1 value)", offset=start)


@safety_net("condition")
def parse_condition_commit(payload, file: str, is_update: bool | None = None,
                           within: str = "generic tile payload") -> ConditionCommit:
    """Decode a `.del` or `.upd` payload. `is_update` defaults to the file name ending in `.upd`."""
    if is_update is None:
        is_update = file.endswith(".upd")
    cur = Cursor(payload, file, "update condition" if is_update else "delete condition", within=within)
    condition = None if cur.at_end() else _parse_node(cur, 0)
    values = []
    if is_update:
        cur.structure = "update values"
        n = cur.u64_count(16, "update value count", "update values")
        for i in range(n):
            start = cur.pos
            cur.structure = f"update value {i}"
            field = cur.string(cur.u64("field name length"), "field name")
            value = cur.bytes(cur.u64("value length"), "value")
            values.append(UpdateValue(field, value, start))
    return ConditionCommit(condition, tuple(values), is_update, cur.remaining)


def parse_delete_condition(payload, file: str) -> ConditionCommit:
    return parse_condition_commit(payload, file, False)


def parse_update_condition(payload, file: str) -> ConditionCommit:
    return parse_condition_commit(payload, file, True)


# -- readable forms ------------------------------------------------------------

def decode_member(raw: bytes, dt: Datatype | None):
    """(decoded value or None, is_string) for one member value."""
    if dt is None:
        return None, False
    value = decode_value(raw, dt)
    if isinstance(value, (bytes, bytearray)):
        return None, False
    return value, dt.is_string


def _literal(raw: bytes, dt: Datatype | None) -> str:
    value, is_string = decode_member(raw, dt)
    if is_string:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if not raw:
        return "NULL"
    if value is None:
        return "0x" + raw.hex()
    return json.dumps(plain(value))


def condition_to_text(node: ConditionNode | None, types: dict[str, Datatype] | None = None) -> str:
    """`NOT(a0 < 5)`, `(a0 >= 5) AND (d0 <> 3)`, `a IN (1, 2)`... Values are decoded when `types`
    (field name → Datatype) knows the field, else shown as `0x<hex>`."""
    types = types or {}
    if node is None:
        return "TRUE"
    if isinstance(node, ConditionValue):
        dt = types.get(node.field)
        if node.op == 253:
            return "TRUE"
        if node.op == 254:
            return "FALSE"
        if node.op in (6, 7):
            members = ", ".join(_literal(m, dt) for m in node.members)
            return f"{node.field} {'IN' if node.op == 6 else 'NOT IN'} ({members})"
        return f"{node.field} {OP_SYMBOLS[node.op]} {_literal(node.value, dt)}"
    if node.combination_op == 2:
        inner = " AND ".join(condition_to_text(c, types) for c in node.children)
        return f"NOT({inner})"
    joiner = f" {node.op_name} "
    return joiner.join(f"({condition_to_text(c, types)})" for c in node.children)
