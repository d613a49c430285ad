"""The var-string RLE / DICTIONARY reversers (docs/format.md §3.4) on their own: the record chain,
corrupt tiles written by TileDB and then damaged, and DICTIONARY refused off var strings."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tiledb

from tdbfs.format.datatypes import DATATYPES
from tdbfs.format.errors import FormatError
from tdbfs.format.filters import FilterPipeline, FilterSpec
from tdbfs.format.reversers.common import Stage, StageError
from tdbfs.format.reversers.var_strings import record_starts, reverse_dictionary
from tdbfs.format.tile import FilterContext, unfilter_tile
from tdbfs.store import ArrayStore


def _walk(buf: bytes, header: int, len_at: int, width: int) -> list[int]:
    """The obvious sequential parse, to check the vectorised one against."""
    out, p = [], 0
    while p < len(buf):
        out.append(p)
        n = int.from_bytes(buf[p + len_at:p + len_at + width], "big")
        p += header + n
    assert p == len(buf)
    return out


@pytest.mark.parametrize("rlw,slw", [(1, 1), (2, 1), (1, 2), (4, 8), (8, 4)])
def test_record_chain_matches_a_sequential_walk(rlw, slw):
    # §3.4 RLE runs: run_len (BE, rlw) | strlen (BE, slw) | bytes. Random strings whose bytes
    # look like plausible lengths, so a wrong start would be taken for a record.
    rng = np.random.default_rng(rlw * 10 + slw)
    parts = []
    for _ in range(500):
        s = bytes(rng.integers(0, 6, size=int(rng.integers(0, 7)), dtype=np.uint8))
        parts.append(int(rng.integers(1, 256 if rlw == 1 else 300)).to_bytes(rlw, "big") + len(s).to_bytes(slw, "big") + s)
    buf = b"".join(parts)
    got = record_starts(np.frombuffer(buf, np.uint8), rlw + slw, rlw, slw, "run")
    assert got.tolist() == _walk(buf, rlw + slw, rlw, slw)


def test_record_chain_refuses_a_record_past_the_end():
    buf = bytes([3, 2]) + b"ab" + bytes([1, 9]) + b"xyz"  # second run claims 9 bytes, 3 remain
    with pytest.raises(StageError, match=r"record at byte 4 needs 11 bytes, past the end of the 9"):
        record_starts(np.frombuffer(buf, np.uint8), 2, 1, 1, "RLE run")


def test_dictionary_is_refused_on_data_that_is_not_var_strings():
    ctx = FilterContext(DATATYPES[2], 4, 22)  # INT32: TileDB's writer refuses DICTIONARY there
    with pytest.raises(StageError, match="only applies to var-sized STRING_ASCII"):
        reverse_dictionary(FilterSpec(14), memoryview(b"\0" * 8), memoryview(b""), Stage(DATATYPES[2], 1 << 20, ctx))


def test_tiledb_refuses_to_write_dictionary_on_fixed_data(tmp_path):
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 3), tile=4, dtype=np.int32))
    attr = tiledb.Attr("a", dtype=np.int32, filters=tiledb.FilterList([tiledb.DictionaryFilter()]))
    tiledb.Array.create(str(tmp_path / "a"), tiledb.ArraySchema(domain=dom, attrs=[attr]))
    with pytest.raises(tiledb.TileDBError, match="only applies to variable length strings"):
        with tiledb.open(str(tmp_path / "a"), "w") as A:
            A[:] = np.arange(4, dtype=np.int32)


def _one_field_array(path, flt, values):
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, len(values) - 1), tile=len(values), dtype=np.int64))
    attr = tiledb.Attr("s", dtype="ascii", var=True, filters=tiledb.FilterList([flt]))
    tiledb.Array.create(str(path), tiledb.ArraySchema(domain=dom, attrs=[attr]))
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    with tiledb.open(str(path), "w") as A:
        A[:] = {"s": arr}
    store = ArrayStore(str(path))
    frag = store.fragments()[0]
    return store, frag, frag.field_by_stem("a0")


def _decode_modified(store, frag, field, change):
    """Decode the var tile of `field` after `change(bytearray)` altered the chunk's metadata and data."""
    loc = frag.location(field, 0, "var")
    raw = bytearray(store.pread(loc.file, loc.offset, loc.persisted_size))
    change(raw)
    ctx = frag.filter_context(field, "var")
    return unfilter_tile(bytes(raw), loc.file, loc.offset, frag.pipeline(field, "var"), ctx, "tile 0",
                         base=loc.offset)


def test_corrupt_rle_run_is_a_format_error_naming_file_and_offset(tmp_path):
    store, frag, field = _one_field_array(tmp_path / "rle", tiledb.RleFilter(), ["aa", "aa", "b", "ccc"])
    good = _decode_modified(store, frag, field, lambda raw: None)
    assert good.data == b"aaaabccc"
    assert np.frombuffer(good.offsets, "<u8").tolist() == [0, 2, 4, 5]
    # chunk: 8 (nchunks) + 12 (header) + metadata (5 u32 + 2 widths = 22) then runs
    # [2|2|aa][1|1|b][1|3|ccc]: make the last run's strlen 200.
    def bad_len(raw):
        data_at = 8 + 12 + 22
        assert raw[data_at:data_at + 4] == b"\x02\x02aa"
        raw[data_at + 8] = 200
    with pytest.raises(FormatError) as err:
        _decode_modified(store, frag, field, bad_len)
    assert err.value.file.endswith("a0_var.tdb") and err.value.offset == frag.location(field, 0, "var").offset + 20
    assert "RLE run record at byte 7 needs 202 bytes" in str(err.value)


def test_dictionary_id_past_the_dictionary_is_a_format_error(tmp_path):
    store, frag, field = _one_field_array(tmp_path / "dict", tiledb.DictionaryFilter(), ["x", "yy", "x", ""])
    good = _decode_modified(store, frag, field, lambda raw: None)
    assert good.data == b"xyyx" and np.frombuffer(good.offsets, "<u8").tolist() == [0, 1, 3, 4]
    loc = frag.location(field, 0, "var")
    (md_len,) = struct.unpack_from("<I", store.pread(loc.file, loc.offset + 16, 4))  # chunk 0's metadata_len

    def bad_id(raw):
        raw[8 + 12 + md_len + 1] = 9  # ids are u8 here: cell 1 now names entry 9 of 3
    with pytest.raises(FormatError, match="id 9 of cell 1 is past the 3 dictionary entries"):
        _decode_modified(store, frag, field, bad_id)


def test_offsets_count_must_match_the_tile(tmp_path):
    store, frag, field = _one_field_array(tmp_path / "n", tiledb.RleFilter(), ["a", "b"])
    loc = frag.location(field, 0, "var")
    raw = store.pread(loc.file, loc.offset, loc.persisted_size)
    ctx = FilterContext(field.datatype, 1, 22, var_strings=True, cell_num=3)
    with pytest.raises(FormatError, match="rebuilds 2 offsets .* but the tile holds 3 cells"):
        unfilter_tile(raw, loc.file, loc.offset, FilterPipeline(65536, (FilterSpec(4),)), ctx, "tile 0",
                      base=loc.offset)
