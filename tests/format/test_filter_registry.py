"""The filter registry against TileDB's own FilterType enum, and the facts other layers ask it."""

from __future__ import annotations

import importlib
import struct

import pytest

import tiledb.libtiledb as lt

from tdbfs.format import filter_registry as reg
from tdbfs.format.datatypes import BY_NAME
from tdbfs.format.filter_reversal import output_type
from tdbfs.format.filters import FilterSpec

#: Ids TileDB keeps out of its public enum: AES-256-GCM is internal, 17 was the withdrawn bitsort.
INTERNAL = {11: "AES_256_GCM", 17: "DEPRECATED_BITSORT"}


def test_every_tiledb_filter_type_has_one_entry():
    public = {name: int(value) for name, value in lt.FilterType.__members__.items()}
    assert len(public) == 18
    for name, fid in public.items():
        assert reg.filter_type(fid).name == name
        assert reg.filter_id(name) == fid
    assert set(public.values()) | set(INTERNAL) == set(range(20))
    assert [f.id for f in reg.FILTER_TYPES] == list(range(20))    # one entry per id, in id order
    for fid, name in INTERNAL.items():
        assert reg.filter_name(fid) == name
    assert reg.filter_type(20) is None and reg.filter_name(20) == "UNKNOWN(20)"


def test_names_and_ids_round_trip():
    for f in reg.FILTER_TYPES:
        assert reg.filter_type(reg.filter_id(f.name)) is f
        assert FilterSpec(f.id).name == f.name
    assert len({f.name for f in reg.FILTER_TYPES}) == len(reg.FILTER_TYPES)


def test_every_reverser_exists():
    routes = [f.reverser for f in reg.FILTER_TYPES] + [f.var_string_reverser for f in reg.FILTER_TYPES]
    for module, function in filter(None, routes):
        assert callable(getattr(importlib.import_module(f"tdbfs.format.reversers.{module}"), function))
    assert [f.id for f in reg.FILTER_TYPES if f.reverser is None] == [17]


def test_compressor_enum():
    # the first option byte of a compression filter; DICTIONARY and DELTA came after TileDB 1.4
    assert [reg.compressor_name(v) for v in range(9)] == [
        "NONE", "GZIP", "ZSTD", "LZ4", "RLE", "BZIP2", "DOUBLE_DELTA", "DICTIONARY", "DELTA"]
    assert reg.MAX_COMPRESSOR == 8 and reg.compressor_name(9) == "UNKNOWN(9)"
    assert [f.id for f in reg.FILTER_TYPES if f.format1_compressor] == [1, 2, 3, 4, 5, 6]


def test_options_by_layout():
    level = bytes([2]) + struct.pack("<i", 7)
    for fid in (1, 2, 3, 4, 5, 14):
        assert reg.decode_options(fid, level) == {"compressor": "ZSTD", "level": 7}
    assert reg.decode_options(9, level) == {}                     # BYTESHUFFLE takes no options
    assert reg.decode_options(10, struct.pack("<I", 32)) == {"max_window_size": 32}
    assert reg.decode_options(18, struct.pack("<fBBHH", 1.0, 1, 1, 2, 3)[:9]) == {}   # short: stays raw
    assert reg.decode_options(99, level) == {}


@pytest.mark.parametrize("fid, ascii_since", [(4, 12), (14, 13)])
def test_which_filters_embed_var_string_offsets(fid, ascii_since):
    assert not reg.offsets_embedded(fid, "STRING_ASCII", ascii_since - 1)
    assert reg.offsets_embedded(fid, "STRING_ASCII", ascii_since)
    assert not reg.offsets_embedded(fid, "STRING_UTF8", 16)
    assert reg.offsets_embedded(fid, "STRING_UTF8", 17)
    assert not reg.offsets_embedded(fid, "CHAR", 22)


def test_only_rle_and_dictionary_embed_offsets():
    assert [f.id for f in reg.FILTER_TYPES if f.embeds_var_offsets] == [4, 14]
    assert not reg.offsets_embedded(None, "STRING_ASCII", 22)
    assert not reg.offsets_embedded(2, "STRING_ASCII", 22)


def test_output_types():
    f64, u16 = BY_NAME["FLOAT64"], BY_NAME["UINT16"]
    assert output_type(FilterSpec(15, {"byte_width": 2}), f64).name == "INT16"
    assert output_type(FilterSpec(15, {}), f64) is f64
    assert output_type(FilterSpec(16), u16).name == "INT16"
    assert output_type(FilterSpec(19, {"reinterpret_type": "INT32"}), u16).name == "INT32"
    assert output_type(FilterSpec(6, {"reinterpret_type": "ANY"}), u16) is u16
    assert output_type(FilterSpec(2), u16) is u16
    assert output_type(FilterSpec(99), u16) is u16


def test_value_tolerance_of_lossy_filters():
    """TileDB takes a tile's min/max before the filters run: SCALE_FLOAT's values come back within half a
    step while their integers fit the byte width; lossy WEBP has no bound; lossless pipelines are exact."""
    def spec(name, **options):
        return FilterSpec(reg.filter_id(name), options)

    scale = spec("SCALE_FLOAT", scale=0.25, offset=-1.0, byte_width=2)
    assert reg.value_tolerance([spec("ZSTD"), spec("BYTESHUFFLE")], -5.0, 5.0) == 0.0
    assert reg.value_tolerance([scale, spec("ZSTD")], -100.0, 100.0) == 0.125
    # a 2-byte integer holds -32768..32767 steps: -8193.0..8190.75 are kept, beyond that nothing is known
    assert reg.value_tolerance([scale], -8193.0, 8190.75) == 0.125
    assert reg.value_tolerance([scale], -8193.0, 8191.0) is None
    assert reg.value_tolerance([spec("SCALE_FLOAT", scale=0.0, offset=0.0, byte_width=4)], 0.0, 1.0) is None
    assert reg.value_tolerance([spec("WEBP", lossless=False)], 0.0, 255.0) is None
    assert reg.value_tolerance([spec("WEBP", lossless=True)], 0.0, 255.0) == 0.0
