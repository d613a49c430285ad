"""TileDB 0.x decoders on bytes: schema, book-keeping, fragment names, tile codecs.

Library-written arrays are checked in tests/test_legacy0x_arrays.py; here the decoders face the
spec's forms (docs/format-0x.md) built by hand, truncation and corruption.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import numpy as np
import pytest

from tdbfs.format.errors import FormatError
from tdbfs.format.legacy0x.book_keeping import parse_book_keeping
from tdbfs.format.legacy0x.codecs import TileLayout, bitunshuffle, decode_tile, default_block_size, undo_delta
from tdbfs.format.legacy0x.names import parse_fragment_name
from tdbfs.format.legacy0x.schema import Codec, parse_schema


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<i", len(raw)) + raw


def original_schema(dense=False, extents=None, compression=(1, 0, 2)) -> bytes:
    """An original Intel-HLS schema (docs/format-0x.md steps 2-9): attrs a1:int32, a2:char var,
    int64 coordinates d1, d2 on [0,3] x [0,7]."""
    out = _s("/ws/arr") + struct.pack("<Bbbq", int(dense), 0, 0, 4)
    out += struct.pack("<i", 2) + _s("a1") + _s("a2") + struct.pack("<i", 2) + _s("d1") + _s("d2")
    dom = struct.pack("<4q", 0, 3, 0, 7)
    out += struct.pack("<i", len(dom)) + dom
    ext = struct.pack("<2q", *extents) if extents else b""
    out += struct.pack("<i", len(ext)) + ext
    out += bytes([0, 4, 1]) + struct.pack("<2i", 1, 0x7FFFFFFF) + bytes(compression)
    return out


def versioned_schema(compression=(1, 0, 2), levels=(-1, 0, 1), offsets=(0, 3), offsets_levels=(0, 1)) -> bytes:
    """The fork's version 2 form: tag, workspace, the original fields, levels, offsets codecs."""
    body = original_schema(compression=compression)
    return (struct.pack("<I", 0xFFFFFFFF - 2) + _s("") + body + struct.pack("<3b", *levels)
            + bytes(offsets) + struct.pack("<2b", *offsets_levels))


def test_original_schema():
    s = parse_schema(original_schema(), "__array_schema.tdb")
    assert s.version is None and s.array_name == "/ws/arr" and not s.dense and s.capacity == 4
    assert [a.name for a in s.attributes] == ["a1", "a2"] and s.dimensions == ("d1", "d2")
    assert s.domain == ((0, 3), (0, 7)) and s.tile_extents is None and s.coord_type.name == "INT64"
    a1, a2 = s.attributes
    assert a1.compression.compressor_name == "GZIP" and not a2.var_sized is False
    assert a2.var_sized and a2.offsets_compression.compressor_name == "NONE"
    assert s.coords_compression.compressor_name == "ZSTD"


def test_versioned_schema():
    s = parse_schema(versioned_schema(compression=(0x21, 3, 0x12)), "__array_schema.tdb")
    assert s.version == 2 and s.workspace == ""
    a1, a2 = s.attributes
    assert a1.compression.bitshuffle and a1.compression.compressor_name == "GZIP" and a1.compression.level == -1
    assert a2.offsets_compression.compressor_name == "LZ4" and a2.offsets_compression.level == 1
    assert s.coords_compression.delta and s.coords_compression.compressor_name == "ZSTD"


@pytest.mark.parametrize("make", [original_schema, versioned_schema])
def test_schema_truncated_anywhere(make):
    data = make()
    for n in range(len(data)):
        with pytest.raises(FormatError) as info:
            parse_schema(data[:n], "arr/__array_schema.tdb")
        err = info.value
        assert err.file == "arr/__array_schema.tdb" and 0 <= err.offset <= n, (n, str(err))


def test_schema_rejects_trailing_bytes_and_unknown_version():
    with pytest.raises(FormatError, match="after the last schema field"):
        parse_schema(original_schema() + b"\0")
    bad = struct.pack("<I", 0xFFFFFFFF - 3) + versioned_schema()[4:]
    with pytest.raises(FormatError, match="version 3"):
        parse_schema(bad)
    dense_without_extents = original_schema(dense=True)
    with pytest.raises(FormatError, match="tile extents"):
        parse_schema(dense_without_extents)


def book_keeping_bytes() -> bytes:
    """Book-keeping of a 2-tile sparse fragment of original_schema() (docs/format-0x.md)."""
    q = lambda *v: struct.pack(f"<{len(v)}q", *v)
    out = q(32) + q(0, 3, 0, 7)                     # non-empty domain
    out += q(2) + q(0, 1, 0, 5) + q(2, 3, 2, 7)     # MBRs
    out += q(2) + q(0, 0, 1, 5) + q(2, 7, 3, 2)     # bounding coords: first, last per tile
    out += q(2, 0, 16) + q(2, 0, 19) + q(2, 0, 17)  # tile offsets a1, a2, coords
    out += q(0) + q(2, 0, 15)                       # var tile offsets
    out += q(0) + q(2, 7, 2)                        # var tile sizes
    out += q(2)                                     # last tile cell number
    return out


def test_book_keeping():
    schema = parse_schema(original_schema())
    bk = parse_book_keeping(gzip.compress(book_keeping_bytes()), "f/__book_keeping.tdb.gz", schema)
    assert bk.non_empty_domain == ((0, 3), (0, 7))
    assert bk.mbrs.tolist() == [[[0, 1], [0, 5]], [[2, 3], [2, 7]]]
    assert bk.bounding_coords.tolist() == [[[0, 0], [1, 5]], [[2, 7], [3, 2]]]
    assert [t.tolist() for t in bk.tile_offsets] == [[0, 16], [0, 19], [0, 17]]
    assert [t.tolist() for t in bk.tile_var_sizes] == [[], [7, 2]] and bk.last_tile_cell_num == 2


def test_book_keeping_truncated_and_corrupt():
    schema = parse_schema(original_schema())
    raw = book_keeping_bytes()
    for n in range(0, len(raw), 3):
        with pytest.raises(FormatError) as info:
            parse_book_keeping(gzip.compress(raw[:n]), "f/__book_keeping.tdb.gz", schema)
        assert info.value.file == "f/__book_keeping.tdb.gz" and info.value.offset <= n
        assert info.value.within == "decompressed stream"
    with pytest.raises(FormatError, match="does not decompress"):
        parse_book_keeping(b"not gzip at all", "f/bk", schema)
    with pytest.raises(FormatError, match="truncated"):
        parse_book_keeping(gzip.compress(raw)[:-12], "f/bk", schema)
    huge = raw[:40] + struct.pack("<q", 1 << 40) + raw[48:]
    with pytest.raises(FormatError, match="MBR count"):
        parse_book_keeping(gzip.compress(huge), "f/bk", schema)


def test_fragment_names():
    n = parse_fragment_name("__7db43b97-8a2c-4a47-9a3b-02af38de29a4140345465445248_1795290225739")
    assert (n.writer_kind, n.uuid, n.thread_id, n.timestamp_ms, n.hidden) == (
        "uuid+thread", "7db43b97-8a2c-4a47-9a3b-02af38de29a4", 140345465445248, 1795290225739, False)
    n = parse_fragment_name("__0x7fff9c84b3c0_1458759561320")  # seed 004's example
    assert (n.writer_kind, n.thread_id, n.timestamp_iso) == ("thread", 0x7fff9c84b3c0, "2016-03-23T18:59:21.320Z")
    n = parse_fragment_name(".__00163e5a1b2c139900000000_1458759561320")
    assert n.hidden and n.writer_kind == "mac+thread" and n.mac == "00163e5a1b2c" and n.thread_id == 139900000000
    assert parse_fragment_name("__12345_99").writer_kind == "process-or-thread"
    for bad, at in (("fragment", 0), ("__abc_12x", 6), ("__nounderscore", 2)):
        with pytest.raises(FormatError) as info:
            parse_fragment_name(bad)
        assert info.value.offset == at


def reference_bitshuffle(values: np.ndarray) -> bytes:
    """bshuf_bitshuffle written from its definition, bit by bit (slow; test sizes only)."""
    elem = values.dtype.itemsize
    raw = np.frombuffer(values.tobytes(), np.uint8).reshape(-1, elem)
    n = len(raw)
    block = default_block_size(elem)
    out = bytearray()
    start = 0
    sizes = [block] * (n // block) + ([n % block - n % block % 8] if n % block >= 8 else [])
    for m in sizes:
        chunk = raw[start:start + m]
        bits = np.zeros(m * elem * 8, np.uint8)
        for j in range(elem):
            for k in range(8):
                for e in range(m):
                    bits[(j * 8 + k) * m + e] = (chunk[e, j] >> k) & 1
        out += np.packbits(bits, bitorder="little").tobytes()
        start += m
    out += raw[start:].tobytes()
    return bytes(out)


@pytest.mark.parametrize("dtype,n", [("<i4", 8), ("<i4", 2048 + 200 + 5), ("<u8", 1024 * 2 + 13), ("<i4", 5),
                                     ("<u2", 4096 + 24)])
def test_bitunshuffle(dtype, n):
    values = (np.arange(n) * 2654435761 % 100003).astype(dtype)
    shuffled = reference_bitshuffle(values)
    assert shuffled != values.tobytes() or n < 8
    assert bitunshuffle(shuffled, values.dtype.itemsize) == values.tobytes()


def test_undo_delta():
    values = np.array([[5, 100], [7, 90], [7, 95], [2, 300]], "<i8")
    deltas = values.copy()
    deltas[1:] = values[1:] - values[:-1]
    assert undo_delta(deltas.tobytes(), np.dtype("<i8"), 2) == values.tobytes()
    wrap = np.array([0xFFFFFFFF, 1], "<u4")  # 0xFFFFFFFF + 1 wraps to 0
    assert np.frombuffer(undo_delta(wrap.tobytes(), np.dtype("<u4"), 1), "<u4").tolist() == [0xFFFFFFFF, 0]


def test_decode_tile_codecs_and_errors():
    values = np.arange(40, dtype="<i4") // 3
    layout = TileLayout(np.dtype("<i4"), 1, 4, 4)
    raw = values.tobytes()
    gz = zlib.compress(raw)
    assert decode_tile(gz, Codec(1, -1), layout, len(raw), "a.tdb", 0, "tile 0")[0] == raw
    # RLE: value, then a big-endian u16 run length
    runs = b"".join(struct.pack("<i", v) + struct.pack(">H", int((values == v).sum())) for v in np.unique(values))
    assert decode_tile(runs, Codec(10, None), layout, len(raw), "a.tdb", 0, "tile 0")[0] == raw
    deltas = np.diff(values, prepend=0).astype("<i4")
    out, record = decode_tile(zlib.compress(deltas.tobytes()), Codec(0x11, -1), layout, len(raw), "a.tdb", 0, "t")
    assert out == raw and "DELTA" in record["pre_filter"]
    with pytest.raises(FormatError) as info:
        decode_tile(gz[:-5], Codec(1, -1), layout, len(raw), "f/a.tdb", 120, "tile 3")
    assert (info.value.file, info.value.structure, info.value.offset) == ("f/a.tdb", "tile 3", 120)
    with pytest.raises(FormatError, match="book-keeping says"):
        decode_tile(gz, Codec(1, -1), layout, len(raw) + 4, "f/a.tdb", 0, "tile 0")
    with pytest.raises(FormatError, match="whole number"):
        decode_tile(runs[:-1], Codec(10, None), layout, len(raw), "f/a.tdb", 0, "tile 0")
