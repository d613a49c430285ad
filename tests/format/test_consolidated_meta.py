"""Consolidated fragment metadata (`__fragment_meta/*.meta`) checked against TileDB's own files."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import tiledb

from tdbfs.format import fragment_metadata as fm
from tdbfs.format.consolidated_fragment_metadata import (ConsolidatedFooter, decode_consolidated_footers,
                                                          parse_consolidated_fragment_metadata)
from tdbfs.format.errors import FormatError
from tdbfs.format.generic_tile import read_generic_tile
from tdbfs.format.schema import parse_schema
from tdbfs.views.describe.consolidated_fragment_metadata import describe_consolidated_fragment_metadata
from tdbfs.views.describe.fragment_metadata import describe_footer

FMD = "__fragment_metadata.tdb"


def load_schemas(uri: str) -> dict:
    out = {}
    sdir = os.path.join(uri, "__schema")
    for name in os.listdir(sdir):
        path = os.path.join(sdir, name)
        if os.path.isfile(path):
            data = open(path, "rb").read()
            out[name] = parse_schema(read_generic_tile(data, 0, name, "array schema").payload, name)
    return out


def own_footer(uri: str, name: str, schemas: dict) -> fm.Footer:
    """The footer in the fragment's own `__fragment_metadata.tdb`."""
    data = open(os.path.join(uri, "__fragments", name, FMD), "rb").read()
    nv = int(name.rsplit("_", 1)[1])
    off, length = fm.locate_footer(data, len(data), nv, None)
    _, schema_name = fm.peek_footer_schema_name(data, FMD, off)
    return fm.parse_footer(data, FMD, schemas[schema_name], off, length, nv)


def meta_files(uri: str) -> list[str]:
    d = os.path.join(uri, "__fragment_meta")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".meta"))


def decode_meta(uri: str, path: str):
    rel = "__fragment_meta/" + os.path.basename(path)
    data = open(path, "rb").read()
    gt = read_generic_tile(data, 0, rel, "consolidated fragment metadata")
    return rel, gt.payload, parse_consolidated_fragment_metadata(gt.payload, rel)


def check_meta(uri: str) -> list[ConsolidatedFooter]:
    schemas = load_schemas(uri)
    infos = {os.path.basename(fi.uri.rstrip("/")): fi for fi in tiledb.array_fragments(uri)}
    (path,) = meta_files(uri)
    rel, payload, entries = decode_meta(uri, path)
    assert sorted(e.fragment_name for e in entries) == sorted(infos)
    expected_offset = 4 + sum(8 + len(e.name) + 8 for e in entries)
    for e in entries:
        assert e.name == e.fragment_name            # v>=9 stores the folder name
        assert e.footer_offset == expected_offset   # footers back to back after the table
        expected_offset += e.footer_length
        assert payload[e.footer_offset:e.footer_offset + e.footer_length] == e.footer
        name, offset, footer = e                    # unpacks as a tuple
        assert (name, offset, footer) == (e.name, e.footer_offset, e.footer)
        fi = infos[e.fragment_name]
        assert fi.has_consolidated_metadata
        version, schema_name = fm.peek_footer_schema_name(payload, rel, e.footer_offset)
        ft = fm.parse_footer(payload, rel, schemas[schema_name], e.footer_offset, e.footer_length,
                             int(e.fragment_name.rsplit("_", 1)[1]), within="payload")
        own = own_footer(uri, e.fragment_name, schemas)
        # the consolidated copy is the fragment's own footer without footer_len
        assert describe_footer(ft) == describe_footer(own)
        assert ft.footer_length == own.footer_length
        assert ft.offset == e.footer_offset
        assert ft.version == fi.version == version
        ned = tuple((lo.decode() if isinstance(lo, bytes) else lo, hi.decode() if isinstance(hi, bytes) else hi)
                    for lo, hi in fi.nonempty_domain)
        assert ft.non_empty_domain == ned
    assert expected_offset == len(payload)
    return entries


def _sparse_var_dim(uri: str, writes: int = 3):
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 99), tile=10, dtype=np.int64),
                        tiledb.Dim("s", domain=(None, None), tile=None, dtype="ascii"))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, capacity=3,
                                                attrs=[tiledb.Attr("a", dtype=np.int32)]))
    for k in range(writes):
        with tiledb.open(uri, "w", timestamp=100 + k) as A:
            A[np.arange(k * 4, k * 4 + 4), np.array(["b", "a", "cc" * (k + 1), "d"])] = \
                np.arange(k * 4, k * 4 + 4, dtype=np.int32)


def test_consolidated_sparse_var_dims(tmp_path):
    uri = str(tmp_path / "sparse")
    _sparse_var_dim(uri)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    entries = check_meta(uri)
    assert len(entries) == 3


def test_consolidated_dense(tmp_path):
    uri = str(tmp_path / "dense")
    dom = tiledb.Domain(tiledb.Dim("r", domain=(0, 15), tile=4, dtype=np.int32),
                        tiledb.Dim("c", domain=(0, 15), tile=4, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=False,
                                                attrs=[tiledb.Attr("v", dtype=np.float32),
                                                       tiledb.Attr("n", dtype=np.int64, nullable=True)]))
    for k, (r0, r1) in enumerate([(0, 3), (2, 9), (10, 16)]):
        with tiledb.open(uri, "w", timestamp=10 + k) as A:
            shape = (r1 - r0, 5)
            A[r0:r1, 3:8] = {"v": np.full(shape, k, np.float32), "n": np.full(shape, k, np.int64)}
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    entries = check_meta(uri)
    assert len(entries) == 3


def test_consolidated_meta_errors(tmp_path):
    uri = str(tmp_path / "err")
    _sparse_var_dim(uri, writes=2)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    (path,) = meta_files(uri)
    rel, payload, entries = decode_meta(uri, path)
    first_name_len = len(entries[0].name)
    # truncated inside the entry table: the second entry's footer offset is missing
    table_end = entries[0].footer_offset
    with pytest.raises(FormatError) as e:
        parse_consolidated_fragment_metadata(payload[:table_end - 3], rel)
    assert e.value.offset == table_end - 8 and e.value.within
    assert "footer offset" in e.value.message
    # an absurd fragment count
    with pytest.raises(FormatError) as e:
        parse_consolidated_fragment_metadata(struct.pack("<I", 2**31) + payload[4:], rel)
    assert e.value.offset == 0      # the count that cannot be right
    # a name longer than the payload
    bad = payload[:4] + struct.pack("<Q", 2**40) + payload[12:]
    with pytest.raises(FormatError) as e:
        parse_consolidated_fragment_metadata(bad, rel)
    assert e.value.offset == 12
    # a footer offset past the end of the payload
    at = 4 + 8 + first_name_len
    bad = payload[:at] + struct.pack("<Q", len(payload) + 1) + payload[at + 8:]
    with pytest.raises(FormatError) as e:
        parse_consolidated_fragment_metadata(bad, rel)
    assert e.value.offset == at
    # a truncated payload cuts the last footer short: decoding that footer fails at its offset
    short = payload[:-5]
    entries_short = parse_consolidated_fragment_metadata(short, rel)
    last = entries_short[-1]
    assert last.footer_offset == entries[-1].footer_offset == max(x.footer_offset for x in entries)
    assert last.footer_length == entries[-1].footer_length - 5
    schema = next(iter(load_schemas(uri).values()))
    with pytest.raises(FormatError) as e:
        fm.parse_footer(short, rel, schema, last.footer_offset, last.footer_length, 22, within="payload")
    assert e.value.within == "payload"
    assert last.footer_offset < e.value.offset <= len(short)


def test_empty_and_uri_names():
    # zero fragments
    assert parse_consolidated_fragment_metadata(struct.pack("<I", 0), "x.meta") == []
    # older writers stored absolute URIs
    name = b"file:///data/arr/__1_1_0123456789abcdef0123456789abcdef_8/"
    footer = b"F" * 10
    off = 4 + 8 + len(name) + 8
    payload = struct.pack("<I", 1) + struct.pack("<Q", len(name)) + name + struct.pack("<Q", off) + footer
    (entry,) = parse_consolidated_fragment_metadata(payload, "x.meta")
    assert entry.fragment_name == "__1_1_0123456789abcdef0123456789abcdef_8"
    assert entry.footer == footer and entry.footer_length == 10


def test_decode_and_describe_consolidated(tmp_path):
    uri = str(tmp_path / "view")
    _sparse_var_dim(uri, writes=2)
    tiledb.consolidate(uri, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    (path,) = meta_files(uri)
    rel, payload, entries = decode_meta(uri, path)
    schemas = load_schemas(uri)
    decoded = decode_consolidated_footers(payload, rel, lambda name: schemas[name])
    assert [d.entry for d in decoded] == entries and all(d.problem is None for d in decoded)
    view = describe_consolidated_fragment_metadata(decoded)
    assert view["fragment_count"] == 2
    for item, e in zip(view["fragments"], entries):
        assert item["name"] == e.name and item["footer_offset"] == e.footer_offset
        assert item["footer_length"] == e.footer_length
        assert item["footer"] == describe_footer(own_footer(uri, e.name, schemas))
        assert "fragment" not in item      # v>=9 stores the folder name itself
    # a missing schema, or a corrupt footer, become a problem of that entry only
    broken = describe_consolidated_fragment_metadata(decode_consolidated_footers(payload, rel, {}.__getitem__))
    assert all("problem" in item and "footer" not in item for item in broken["fragments"])
    bad = bytearray(payload)
    bad[entries[1].footer_offset:entries[1].footer_offset + 4] = struct.pack("<I", 0xFFFFFFFF)
    partial = describe_consolidated_fragment_metadata(
        decode_consolidated_footers(bytes(bad), rel, lambda name: schemas[name]))
    assert "footer" in partial["fragments"][0]
    assert partial["fragments"][1]["problem"]["offset"] == entries[1].footer_offset
