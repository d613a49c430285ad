"""`.del`/`.upd` conditions, `.con`, `.ign` and `.vac` files against what TileDB writes."""

from __future__ import annotations

import os
import shutil
import struct

import numpy as np
import pytest

import tiledb

from tdbfs.format.commits import (
    ConditionExpression,
    ConditionValue,
    condition_to_text,
    normalize_vacuum_path,
    parse_condition_commit,
    parse_consolidated_commits,
    parse_delete_condition,
    parse_ignore_entries,
    parse_ignore_file,
    parse_update_condition,
    parse_vacuum_entries,
    parse_vacuum_file,
)
from tdbfs.format.datatypes import BY_NAME
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile
from tdbfs.format.names import parse_fragment_name, parse_timestamped_name
from tdbfs.format.schema import parse_schema
from tdbfs.views.describe.commits import (describe_condition, describe_condition_commit,
                                          describe_consolidated_commits)

from corpus import BACKCOMPAT
N = 40


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def commits(uri: str, ext: str) -> list[str]:
    d = os.path.join(uri, "__commits")
    names = [n for n in os.listdir(d) if n.endswith(ext)]
    return [os.path.join(d, n) for n in sorted(names, key=lambda n: parse_timestamped_name(n).sort_key)]


def field_types(uri: str) -> dict:
    d = os.path.join(uri, "__schema")
    name = max((n for n in os.listdir(d) if n != "__enumerations"), key=lambda n: parse_timestamped_name(n).sort_key)
    s = parse_schema(read_generic_tile(read(os.path.join(d, name)), 0, name, "schema").payload, name)
    return {x.name: x.datatype for x in (*s.dimensions, *s.attributes)}


def decode_del(path: str):
    return parse_delete_condition(read_generic_tile(read(path), 0, path, "delete condition").payload, path)


# -- a tiny evaluator of a decoded tree over numpy columns (cells it selects are KEPT) -------------

NP_OPS = {0: np.less, 1: np.less_equal, 2: np.greater, 3: np.greater_equal, 4: np.equal, 5: np.not_equal}


def evaluate(node, columns: dict, types: dict) -> np.ndarray:
    if isinstance(node, ConditionExpression):
        parts = [evaluate(c, columns, types) for c in node.children]
        if node.combination_op == 0:
            return np.logical_and.reduce(parts)
        if node.combination_op == 1:
            return np.logical_or.reduce(parts)
        return ~parts[0]
    col = columns[node.field]
    dt = types[node.field]

    def value(raw):
        return raw.decode() if dt.is_string else np.frombuffer(raw, dt.dtype)[0]

    if node.op in (6, 7):
        hit = np.isin(col, [value(m) for m in node.members])
        return hit if node.op == 6 else ~hit
    return NP_OPS[node.op](col, value(node.value))


@pytest.fixture(scope="module")
def deleted(tmp_path_factory):
    """A sparse array, three fragments, three delete commits. Returns (uri, original columns)."""
    uri = str(tmp_path_factory.mktemp("deletes") / "a")
    dom = tiledb.Domain(tiledb.Dim("d0", domain=(0, 99), tile=10, dtype=np.int32))
    attrs = [tiledb.Attr("a0", dtype=np.int64), tiledb.Attr("f", dtype=np.float32), tiledb.Attr("s", dtype=str)]
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=attrs))
    cols = {"d0": np.arange(N, dtype=np.int32), "a0": np.arange(N, dtype=np.int64) * 3,
            "f": np.linspace(0, 1, N, dtype=np.float32), "s": np.array([f"x{i % 7}" for i in range(N)])}
    for part in np.array_split(np.arange(N), 3):
        with tiledb.open(uri, "w") as A:
            A[cols["d0"][part]] = {"a0": cols["a0"][part], "f": cols["f"][part],
                                   "s": np.array(cols["s"][part], dtype=object)}
    for cond in ("a0 < 5", "a0 >= 100 and d0 != 3", "s == 'x3' or a0 in [9, 12, 15]"):
        with tiledb.open(uri, "d") as A:
            A.query(cond=cond).submit()
    return uri, cols


def test_delete_conditions_match_tiledb(deleted):
    uri, cols = deleted
    types = field_types(uri)
    dels = commits(uri, ".del")
    assert len(dels) == 3
    decoded = [decode_del(p) for p in dels]
    assert all(not c.is_update and c.trailing_bytes == 0 for c in decoded)
    # the stored tree is the negation of the user's condition (TileDB pushes the NOT into the ops)
    assert [condition_to_text(c.condition, types) for c in decoded] == [
        "a0 >= 5",
        "(a0 < 100) OR (d0 = 3)",
        "(s <> 'x3') AND (a0 NOT IN (9, 12, 15))",
    ]
    assert condition_to_text(decoded[0].condition) == "a0 >= 0x0500000000000000"
    # cells satisfying every stored condition are exactly the cells TileDB still returns
    keep = np.logical_and.reduce([evaluate(c.condition, cols, types) for c in decoded])
    with tiledb.open(uri) as A:
        got = A[:]
    order = np.argsort(got["d0"])
    assert list(got["d0"][order]) == list(cols["d0"][keep])
    assert list(got["a0"][order]) == list(cols["a0"][keep])
    # marker names parse as timestamped names, after the fragments they delete from
    frag_t = max(parse_fragment_name(f.uri.rsplit("/", 1)[-1]).t2 for f in tiledb.array_fragments(uri))
    assert all(parse_timestamped_name(os.path.basename(p)).t1 >= frag_t for p in dels)


def test_condition_dict_and_text(deleted):
    uri, _ = deleted
    types = field_types(uri)
    third = decode_del(commits(uri, ".del")[2])
    d = describe_condition(third.condition, types)
    assert d["node"] == "expression" and d["combination_op"] == "AND" and d["offset"] == 0
    s_node, in_node = d["children"]
    assert s_node == {"node": "value", "op": "NE", "field": "s", "offset": 10, "value_hex": b"x3".hex(),
                      "datatype": "STRING_UTF8", "value": "x3"}
    assert in_node["op"] == "NOT_IN" and in_node["offsets"] == [0, 8, 16] and in_node["values"] == [9, 12, 15]
    assert "values" not in describe_condition(third.condition)["children"][1]
    view = describe_condition_commit(decode_del(commits(uri, ".del")[0]), types)
    assert view["stored_condition"] == "a0 >= 5" and "update_values" not in view
    assert view["deletes_cells_where"] == "NOT(a0 >= 5)"
    assert view["condition"]["value"] == 5 and view["condition"]["datatype"] == "INT64"


def test_consolidated_commits_and_ignore(deleted, tmp_path):
    uri = str(tmp_path / "copy")
    shutil.copytree(deleted[0], uri)
    originals = {os.path.basename(p): read(p) for p in commits(uri, ".del")}
    wrts = [os.path.basename(p) for p in commits(uri, ".wrt")]
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "commits"}))
    cons = commits(uri, ".con")
    assert len(cons) == 1
    data = read(cons[0])
    entries = parse_consolidated_commits(data, cons[0])
    assert [e.kind for e in entries] == ["wrt"] * 3 + ["del"] * 3
    assert [os.path.basename(e.path) for e in entries] == wrts + sorted(
        originals, key=lambda n: parse_timestamped_name(n).sort_key)
    assert all(e.path.startswith("__commits/__") for e in entries)
    types = field_types(uri)
    for e in entries:
        assert data[e.offset:e.offset + len(e.line)].decode() == e.line
        if e.kind == "del":
            assert e.embedded == originals[os.path.basename(e.path)]
            assert data[e.embedded_offset:e.embedded_offset + e.embedded_size] == e.embedded
            # the embedded gtile decodes in place, at its offset in the .con file
            g = read_generic_tile(data, e.embedded_offset, cons[0], "embedded delete condition")
            assert g.end == e.embedded_offset + e.embedded_size
            assert condition_to_text(parse_delete_condition(g.payload, e.path).condition, types) == \
                condition_to_text(decode_del(os.path.join(deleted[0], e.path)).condition, types)
        else:
            assert e.embedded is None
    assert entries[0] is entries.entries[0] and len(entries) == 6
    d = describe_consolidated_commits(entries)["entries"]
    assert d[0] == {"path": entries[0].path, "kind": "wrt", "offset": 0}
    assert d[3]["embedded_size"] == len(originals[os.path.basename(entries[3].path)])

    # vacuuming the commits removes the individual markers; the .con stays the source
    tiledb.vacuum(uri, config=tiledb.Config({"sm.vacuum.mode": "commits"}))
    assert commits(uri, ".wrt") == [] and commits(uri, ".del") == []
    # deleting a fragment that is only listed in the .con writes a .ign
    victim = tiledb.array_fragments(uri)[1]
    tiledb.Array.delete_fragments(uri, *victim.timestamp_range)
    igns = commits(uri, ".ign")
    assert len(igns) == 1
    ign = parse_ignore_entries(read(igns[0]), igns[0])
    name = victim.uri.rsplit("/", 1)[-1]
    assert parse_ignore_file(read(igns[0]), igns[0]) == [e.path for e in ign] == [f"__commits/{name}.wrt"]
    assert ign[0].line == ign[0].path         # written relative, without a leading '/'
    assert any(e.path == ign[0].path for e in entries)
    assert ign[0].offset == 0 and len(ign) == 1
    with tiledb.open(uri) as A:
        assert len(tiledb.array_fragments(uri)) == 2


def test_fragment_consolidation_vac(deleted, tmp_path):
    uri = str(tmp_path / "copy")
    shutil.copytree(deleted[0], uri)
    before = sorted(f.uri.rsplit("/", 1)[-1] for f in tiledb.array_fragments(uri))
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "fragments"}))
    vacs = commits(uri, ".vac")
    assert len(vacs) == 1
    entries = parse_vacuum_entries(read(vacs[0]), vacs[0])
    assert sorted(e.path for e in entries) == [f"__fragments/{n}" for n in before]
    assert parse_vacuum_file(read(vacs[0]), vacs[0]) == [e.path for e in entries]
    assert all(e.line.startswith("/__fragments/") for e in entries)     # v>=19: relative to the array URI
    info = tiledb.array_fragments(uri)
    assert sorted(u.rsplit("/", 1)[-1] for u in info.to_vacuum) == before
    # the .vac is named after the consolidated fragment it belongs to
    vac_name = parse_timestamped_name(os.path.basename(vacs[0]))
    new = [f for f in os.listdir(os.path.join(uri, "__fragments")) if f not in before]
    assert [vac_name.stem] == new


def test_vacuum_path_normalisation():
    assert normalize_vacuum_path("/__fragments/__1_1_" + "a" * 32 + "_22") == "__fragments/__1_1_" + "a" * 32 + "_22"
    # before v19 the lines were absolute URIs
    assert normalize_vacuum_path("file:///data/arr/__fragments/__1_2_x_18") == "__fragments/__1_2_x_18"
    assert normalize_vacuum_path("s3://bucket/arr/__meta/__1_2_abc") == "__meta/__1_2_abc"
    assert normalize_vacuum_path("file:///data/arr/__1_2_" + "b" * 32 + "_5/") == "__1_2_" + "b" * 32 + "_5"
    data = b"file:///a/__1_1_x_5\n\n/__fragments/f2\nlast-without-newline"
    entries = parse_vacuum_entries(data, "x.vac")
    assert parse_vacuum_file(data, "x.vac") == ["__1_1_x_5", "__fragments/f2", "last-without-newline"]
    assert [(e.path, e.offset) for e in entries] == [("__1_1_x_5", 0), ("__fragments/f2", 21),
                                                     ("last-without-newline", 37)]
    with pytest.raises(FormatError) as e:
        parse_vacuum_file(b"ok\n\xff\xfe\n", "bad.vac")
    assert e.value.offset == 3 and e.value.file == "bad.vac"


# -- synthetic payloads, byte for byte as deletes_and_updates/serialization.cc writes them ---------

def value_node(op: int, field: str, value: bytes, offsets: list[int] | None = None) -> bytes:
    out = struct.pack("<BBI", 1, op, len(field)) + field.encode() + struct.pack("<Q", len(value)) + value
    if offsets is not None:
        out += struct.pack("<Q", 8 * len(offsets)) + b"".join(struct.pack("<Q", o) for o in offsets)
    return out


def expr_node(op: int, *children: bytes) -> bytes:
    return struct.pack("<BBQ", 0, op, len(children)) + b"".join(children)


def update_values(*pairs) -> bytes:
    out = struct.pack("<Q", len(pairs))
    for field, value in pairs:
        out += struct.pack("<Q", len(field)) + field.encode() + struct.pack("<Q", len(value)) + value
    return out


TYPES = {"a": BY_NAME["INT32"], "s": BY_NAME["STRING_ASCII"], "x": BY_NAME["FLOAT64"]}


def test_update_payload():
    cond = expr_node(2, expr_node(0, value_node(3, "a", struct.pack("<i", 5)),
                                  value_node(6, "s", b"abcd", [0, 1, 3])))
    payload = cond + update_values(("x", struct.pack("<d", 1.5)), ("s", b"new"))
    c = parse_update_condition(payload, "__commits/__1_1_" + "a" * 32 + "_22.upd")
    assert c.is_update and c.trailing_bytes == 0
    assert condition_to_text(c.condition, TYPES) == "NOT((a >= 5) AND (s IN ('a', 'bc', 'd')))"
    assert [(u.field, u.value) for u in c.update_values] == [("x", struct.pack("<d", 1.5)), ("s", b"new")]
    assert c.update_values[0].offset == len(cond) + 8
    view = describe_condition_commit(c, TYPES)
    assert view["updates_cells_where"] == "(a >= 5) AND (s IN ('a', 'bc', 'd'))"
    assert view["update_values"] == [
        {"field": "x", "value_hex": struct.pack("<d", 1.5).hex(), "datatype": "FLOAT64", "value": 1.5},
        {"field": "s", "value_hex": b"new".hex(), "datatype": "STRING_ASCII", "value": "new"}]
    # chosen by the file name when not told
    assert parse_condition_commit(payload, "x.upd").is_update
    assert parse_condition_commit(cond, "x.del").update_values == ()


def test_ops_and_literals():
    ops = [value_node(op, "a", struct.pack("<i", -2)) for op in range(6)]
    tree = expr_node(1, *ops, value_node(253, "a", b""), value_node(254, "a", b""),
                     value_node(7, "x", struct.pack("<dd", 0.5, 2.0), [0, 8]), value_node(4, "s", b"it's"),
                     value_node(4, "a", b""))
    c = parse_delete_condition(tree, "d.del")
    assert condition_to_text(c.condition, TYPES) == (
        "(a < -2) OR (a <= -2) OR (a > -2) OR (a >= -2) OR (a = -2) OR (a <> -2) OR (TRUE) OR (FALSE) OR "
        "(x NOT IN (0.5, 2.0)) OR (s = 'it\\'s') OR (a = NULL)")
    kids = c.condition.children
    assert [k.op_name for k in kids] == ["LT", "LE", "GT", "GE", "EQ", "NE", "ALWAYS_TRUE", "ALWAYS_FALSE",
                                         "NOT_IN", "EQ", "EQ"]
    assert isinstance(kids[0], ConditionValue) and kids[8].members == [struct.pack("<d", 0.5), struct.pack("<d", 2.0)]
    assert parse_delete_condition(b"", "empty.del").condition is None


def assert_points_at_cut(err: FormatError, cut: int) -> None:
    """The error is at the field (or count) that straddles the cut and says what was left."""
    left = cut - err.offset
    assert left >= 0, (cut, str(err))
    # a count whose items do not fit points at the count, a u64 (the number that cannot be right)
    assert f"only {left} remain" in err.message or f"exceeds the {left - 8} bytes that remain" in err.message, \
        (cut, str(err))


def test_condition_corruption():
    tree = expr_node(0, value_node(0, "a0", b"\x01\x00"), value_node(6, "b", b"xy", [0, 1]))
    assert parse_delete_condition(tree, "d.del").trailing_bytes == 0
    for cut in range(1, len(tree)):
        with pytest.raises(FormatError) as e:
            parse_delete_condition(tree[:cut], "__commits/d.del")
        err = e.value
        assert err.file == "__commits/d.del" and err.within == "generic tile payload"
        assert_points_at_cut(err, cut)
    with pytest.raises(FormatError) as e:
        parse_delete_condition(b"\x07", "d.del")
    assert e.value.offset == 0 and "node type" in e.value.message
    with pytest.raises(FormatError) as e:
        parse_delete_condition(value_node(9, "a", b""), "d.del")
    assert e.value.offset == 1 and "op" in e.value.message
    with pytest.raises(FormatError) as e:
        parse_delete_condition(struct.pack("<BBQ", 0, 0, 2 ** 40), "d.del")
    assert e.value.offset == 2 and "exceeds" in e.value.message      # at the count itself
    with pytest.raises(FormatError) as e:
        parse_delete_condition(value_node(6, "b", b"xy", [0, 5]), "d.del")
    assert "beyond" in e.value.message
    deep = b"".join(struct.pack("<BBQ", 0, 2, 1) for _ in range(2000)) + value_node(0, "a", b"")
    with pytest.raises(FormatError) as e:
        parse_delete_condition(deep, "d.del")
    assert "deeper" in e.value.message
    with pytest.raises(FormatError) as e:
        parse_update_condition(tree + update_values(("a0", b"\x01\x02"))[:-1], "u.upd")
    assert e.value.structure == "update value 0" and e.value.offset == len(tree) + 8 + 8 + 2 + 8


def test_consolidated_commits_corruption():
    gt = b"G" * 10
    con = b"/__commits/a.wrt\n/__commits/b.del\n" + struct.pack("<Q", len(gt)) + gt + b"/__commits/c.upd\n"
    entries = parse_consolidated_commits(con, "x.con")
    assert [(e.path, e.kind) for e in entries] == [("__commits/a.wrt", "wrt"), ("__commits/b.del", "del"),
                                                   ("__commits/c.upd", "upd")]
    assert entries[1].embedded == gt and entries[1].embedded_offset == 34 + 8
    with pytest.raises(FormatError) as e:
        parse_consolidated_commits(con[:34 + 8 + 5], "x.con")
    assert e.value.offset == 34 + 8 and "embedded .del file" in e.value.message
    with pytest.raises(FormatError) as e:
        parse_consolidated_commits(con[:34 + 3], "x.con")
    assert e.value.offset == 34


@pytest.mark.backcompat
def test_backcompat_con_files():
    for v in ("v18", "v19"):
        path = [os.path.join(r, f) for r, _, fs in os.walk(f"{BACKCOMPAT}/{v}") for f in fs if f.endswith(".con")][0]
        entries = parse_consolidated_commits(read(path), path)
        assert len(entries) == 1 and entries[0].kind == "wrt"
        frag = os.path.basename(entries[0].path)[:-len(".wrt")]
        assert os.path.isdir(os.path.join(os.path.dirname(os.path.dirname(path)), "__fragments", frag))
        assert parse_fragment_name(frag).format_version == int(v[1:])
