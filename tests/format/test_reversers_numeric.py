"""Unit tests of the numeric reversers on hand-made chunks (docs/format.md §3.3).

The filters as TileDB writes them today are checked against real arrays in
tests/test_filters_match_tiledb.py; here are the layouts TileDB no longer writes
(BIT_WIDTH_REDUCTION / POSITIVE_DELTA on DATETIME before format 20), bit widths
real data rarely reaches (double-delta values that cross u64 words), the
bitshuffle transpose against the reference `bitshuffle` package, and hostile
headers, which must fail with a StageError before anything large is allocated.
Every byte string here is built from the spec section named next to it.
"""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from tdbfs.format.datatypes import BY_NAME
from tdbfs.format.errors import FormatError
from tdbfs.format.filter_reversal import output_type
from tdbfs.format.filter_registry import decode_options
from tdbfs.format.filters import FilterPipeline, FilterSpec
from tdbfs.format.reversers.bit_width import reverse_bit_width
from tdbfs.format.reversers.common import Stage, StageError
from tdbfs.format.reversers.deltas import (delta_decode, double_delta_decode, reverse_delta,
                                           reverse_double_delta, reverse_positive_delta)
from tdbfs.format.reversers.scale_float import reverse_scale_float
from tdbfs.format.reversers.shuffles import bitunshuffle, reverse_bitshuffle
from tdbfs.format.reversers.webp import reverse_webp
from tdbfs.format.reversers.xor import reverse_xor
from tdbfs.format.tile import FilterContext, unfilter_tile

LIMIT = 1 << 20


def stage(type_name: str, version: int = 22, limit: int = LIMIT) -> Stage:
    dt = BY_NAME[type_name]
    return Stage(dt, limit, FilterContext(dt, dt.size, version))


def mv(b: bytes) -> memoryview:
    return memoryview(b)


# -- DOUBLE_DELTA (§3.3): a port of DoubleDelta::compress to make streams -------------------


def dd_encode(values: np.ndarray) -> bytes:
    """dd_compressor.cc: u8 bitsize, u64 n, then raw values or v0, v1 and per value a sign
    bit and `bitsize` magnitude bits, MSB first in u64 words stored little-endian."""
    v = [int(x) for x in values.astype(np.int64)] if values.dtype.kind != "u" else [int(x) for x in values]
    n = len(v)
    w = values.dtype.itemsize
    deltas = [v[i] - v[i - 1] for i in range(1, n)]
    mx = abs(deltas[0]) if deltas else 0
    for i in range(1, len(deltas)):
        mx = max(mx, abs(deltas[i] - deltas[i - 1]))
    bitsize = max(1, mx.bit_length()) if n > 2 else 0
    out = struct.pack("<BQ", bitsize, n)
    if bitsize >= 8 * w - 1:
        return out + values.tobytes()
    out += values[:2].tobytes()
    bits = []
    for i in range(2, n):
        dd = deltas[i - 1] - deltas[i - 2]
        bits.append(1 if dd < 0 else 0)
        bits += [(abs(dd) >> b) & 1 for b in range(bitsize - 1, -1, -1)]
    if bits:
        bits += [0] * (-len(bits) % 64)
        words = np.packbits(np.array(bits, np.uint8)).view(">u8").astype("<u8")
        out += words.tobytes()
    return out


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("spread", [0, 1, 3, 1000, 2 ** 20, 2 ** 40])
def test_double_delta_bit_widths(dtype, spread):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(spread)
    steps = rng.integers(-spread, spread + 1, 200) if spread else np.full(200, 7)
    vals = (np.cumsum(steps) + (2 ** (8 * dt.itemsize - 2) if dt.kind == "u" else 0)).astype(np.int64).astype(dt)
    enc = dd_encode(vals)
    out, info = double_delta_decode(mv(enc), vals.nbytes, dt)
    assert out == vals.tobytes()
    assert info["values"] == 200 and info["bitsize"] == enc[0]


def test_double_delta_value_crossing_words():
    """bitsize 40: 41 bits per value, so values straddle the u64 words."""
    vals = np.array([0, 2 ** 39, -(2 ** 38), 5, 2 ** 39 - 1, 17, 0, 3], np.int64)
    enc = dd_encode(vals)
    assert enc[0] == 41
    assert double_delta_decode(mv(enc), vals.nbytes, np.dtype("<i8"))[0] == vals.tobytes()


@pytest.mark.parametrize("n", [1, 2, 3])
def test_double_delta_short_parts(n):
    vals = np.array([5, -3, 9][:n], np.int32)
    assert double_delta_decode(mv(dd_encode(vals)), vals.nbytes, np.dtype("<i4"))[0] == vals.tobytes()


def test_double_delta_refuses_lying_headers():
    vals = np.arange(100, dtype=np.int64) ** 2
    enc = dd_encode(vals)
    with pytest.raises(StageError, match="part header says"):
        double_delta_decode(mv(enc), vals.nbytes - 8, np.dtype("<i8"))
    huge = enc[:1] + struct.pack("<Q", 2 ** 60) + enc[9:]
    with pytest.raises(StageError):
        double_delta_decode(mv(huge), vals.nbytes, np.dtype("<i8"))
    with pytest.raises(StageError, match="words of double deltas"):
        double_delta_decode(mv(enc[:-8]), vals.nbytes, np.dtype("<i8"))


def compressor_chunk(parts_md: list[bytes], parts_data: list[tuple[int, bytes]]) -> tuple[bytes, bytes]:
    """§3.3 compressor header: u32 n_md, u32 n_data, per part {u32 unfiltered, u32 filtered}."""
    md = struct.pack("<II", len(parts_md), len(parts_data))
    md += b"".join(struct.pack("<II", u, len(p)) for u, p in parts_data)
    return md, b"".join(p for _, p in parts_data)


def test_double_delta_reinterpret_type_and_record():
    vals = np.arange(0, 300, 3, dtype=np.int16)
    md, data = compressor_chunk([], [(vals.nbytes, dd_encode(vals))])
    spec = FilterSpec(6, {"compressor": "DOUBLE_DELTA", "level": -1, "reinterpret_type": "INT16"})
    rest, out, rec = reverse_double_delta(spec, mv(md), mv(data), stage("FLOAT32"))
    assert bytes(out) == vals.tobytes() and len(rest) == 0
    assert rec["element_type"] == "INT16" and rec["parts"][0]["bitsize"] == 2 and rec["parts"][0]["values"] == 100


def test_double_delta_refuses_floats():
    spec = FilterSpec(6, {"compressor": "DOUBLE_DELTA", "level": -1, "reinterpret_type": "ANY"})
    with pytest.raises(StageError, match="FLOAT64"):
        reverse_double_delta(spec, mv(b""), mv(b""), stage("FLOAT64"))


# -- DELTA (§3.3) -----------------------------------------------------------------------


def test_delta_wraps_like_the_element_type():
    vals = np.array([250, 3, 255, 0, 128], np.uint8)
    part = struct.pack("<Q", 5) + np.diff(vals, prepend=np.uint8(0)).astype(np.uint8).tobytes()
    out, info = delta_decode(mv(part), 5, np.dtype("u1"))
    assert out == vals.tobytes() and info == {"values": 5, "first_value": 250}
    md, data = compressor_chunk([], [(5, part)])
    spec = FilterSpec(19, {"compressor": "DELTA", "level": -1, "reinterpret_type": "ANY"})
    assert bytes(reverse_delta(spec, mv(md), mv(data), stage("UINT8"))[1]) == vals.tobytes()
    with pytest.raises(StageError):
        delta_decode(mv(part[:-1]), 5, np.dtype("u1"))


# -- BIT_WIDTH_REDUCTION (§3.3) ------------------------------------------------------------


def bwr_chunk(windows: list[tuple[int, int, bytes, int]], elem: str, orig_len: int, prev_md: bytes = b""):
    """md: u32 original_len, u32 n_windows, per window {T min, u8 bits, u32 window_bytes}."""
    md = struct.pack("<II", orig_len, len(windows))
    for vmin, bits, _stored, nbytes in windows:
        md += np.array([vmin], elem).tobytes() + struct.pack("<BI", bits, nbytes)
    return md + prev_md, b"".join(w[2] for w in windows)


def test_bit_width_windows_of_every_width_and_raw():
    w8 = np.array([1, -2, 100], np.int8)          # + min -1000
    w16 = np.array([300, -7, 0], np.int16)        # + min 5
    raw = np.array([2 ** 40, -3, 9], np.int64)    # stored as is (64 bits)
    w32 = np.array([70000, 1, 2], np.int32)       # + min -9
    md, data = bwr_chunk([(-1000, 8, w8.tobytes(), 24), (5, 16, w16.tobytes(), 24),
                          (0, 64, raw.tobytes(), 24), (-9, 32, w32.tobytes(), 24)], "<i8", 96, b"PREV")
    rest, out, rec = reverse_bit_width(FilterSpec(7), mv(md), mv(data), stage("INT64"))
    want = np.concatenate([w8.astype(np.int64) - 1000, w16.astype(np.int64) + 5, raw, w32.astype(np.int64) - 9])
    assert np.array_equal(np.frombuffer(out, "<i8"), want)
    assert bytes(rest) == b"PREV"
    assert rec["windows_by_bits"] == {8: 1, 16: 1, 32: 1, 64: 1} and rec["original_length"] == 96


def test_bit_width_unsigned_values_are_zero_extended():
    stored = np.array([255, 0, 128], np.uint8)
    md, data = bwr_chunk([(2 ** 63, 8, stored.tobytes(), 24)], "<u8", 24)
    out = reverse_bit_width(FilterSpec(7), mv(md), mv(data), stage("UINT64"))[1]
    assert np.array_equal(np.frombuffer(out, "<u8"), stored.astype(np.uint64) + np.uint64(2 ** 63))


def test_bit_width_datetime_gate():
    """DATETIME is reduced as int64 only from format 20 on (bit_width_reduction_filter.cc);
    before that the filter is a pure pass-through with no header."""
    md, data = bwr_chunk([(10, 8, bytes([0, 1, 2]), 24)], "<i8", 24)
    out = reverse_bit_width(FilterSpec(7), mv(md), mv(data), stage("DATETIME_NS", version=20))[1]
    assert np.array_equal(np.frombuffer(out, "<i8"), [10, 11, 12])
    rest, out, rec = reverse_bit_width(FilterSpec(7), mv(b"M"), mv(b"DATA"), stage("DATETIME_NS", version=19))
    assert (bytes(rest), bytes(out), rec["applied"]) == (b"M", b"DATA", False)
    rest, out, rec = reverse_bit_width(FilterSpec(7), mv(b""), mv(b"xy"), stage("INT8"))
    assert bytes(out) == b"xy" and rec["applied"] is False


def test_bit_width_hostile_headers():
    with pytest.raises(StageError, match="windows"):
        reverse_bit_width(FilterSpec(7), mv(struct.pack("<II", 8, 10 ** 9)), mv(b""), stage("INT32"))
    with pytest.raises(StageError, match="can hold"):
        reverse_bit_width(FilterSpec(7), mv(struct.pack("<II", 2 ** 31, 0)), mv(b""), stage("INT32", limit=100))
    md, data = bwr_chunk([(0, 8, b"\x01\x02\x03", 8)], "<i4", 8)  # 2 values of 8 bits take 2 bytes
    with pytest.raises(StageError, match="stored bytes"):
        reverse_bit_width(FilterSpec(7), mv(md), mv(data), stage("INT32"))
    md, data = bwr_chunk([(0, 24, b"\x01\x02", 8)], "<i4", 8)
    with pytest.raises(StageError, match="bit width 24"):
        reverse_bit_width(FilterSpec(7), mv(md), mv(data), stage("INT32"))


# -- POSITIVE_DELTA (§3.3) -----------------------------------------------------------------


def pd_chunk(windows: list[tuple[int, bytes]], elem: str) -> tuple[bytes, bytes]:
    """md: u32 n_windows, per window {T first_value, u32 window_bytes}; data: the deltas."""
    md = struct.pack("<I", len(windows))
    md += b"".join(np.array([f], elem).tobytes() + struct.pack("<I", len(d)) for f, d in windows)
    return md, b"".join(d for _, d in windows)


def test_positive_delta_windows():
    a = np.array([0, 1, 1, 5], np.uint16)
    b = np.array([0, 65535, 2], np.uint16)   # wraps past 65535 like the C++ does
    md, data = pd_chunk([(100, a.tobytes()), (7, b.tobytes())], "<u2")
    out = reverse_positive_delta(FilterSpec(10), mv(md), mv(data), stage("UINT16"))[1]
    assert np.array_equal(np.frombuffer(out, "<u2"), [100, 101, 102, 107, 7, 6, 8])


def test_positive_delta_unaligned_window_stored_as_is():
    md, data = pd_chunk([(3, np.array([0, 2], "<i2").tobytes()), (0, b"\x09")], "<i2")
    out = reverse_positive_delta(FilterSpec(10), mv(md), mv(data), stage("INT16"))[1]
    assert bytes(out) == np.array([3, 5], "<i2").tobytes() + b"\x09"


def test_positive_delta_datetime_gate_and_hostile_count():
    md, data = pd_chunk([(1000, np.array([0, 1, 2], "<i8").tobytes())], "<i8")
    out = reverse_positive_delta(FilterSpec(10), mv(md), mv(data), stage("DATETIME_MS", version=22))[1]
    assert np.array_equal(np.frombuffer(out, "<i8"), [1000, 1001, 1003])
    rest, out, rec = reverse_positive_delta(FilterSpec(10), mv(md), mv(data), stage("DATETIME_MS", version=19))
    assert bytes(out) == data and bytes(rest) == md and rec["applied"] is False
    with pytest.raises(StageError, match="windows"):
        reverse_positive_delta(FilterSpec(10), mv(struct.pack("<I", 2 ** 31)), mv(b""), stage("INT32"))


# -- BITSHUFFLE (§3.3) ------------------------------------------------------------------------


@pytest.mark.parametrize("s", [1, 2, 4, 8])
@pytest.mark.parametrize("nbytes", [8, 64, 520, 8192, 8192 * 3 + 1040, 8192 + 8 * 8 * 7])
def test_bitunshuffle_inverts_the_bitshuffle_package(s, nbytes):
    import bitshuffle  # the reference implementation (a test dependency)
    rng = np.random.default_rng(nbytes + s)
    vals = rng.integers(0, 256, nbytes, dtype=np.uint8).view(f"u{s}")
    shuffled = bitshuffle.bitshuffle(vals, 8192 // s).view(np.uint8)
    assert np.array_equal(bitunshuffle(shuffled, s), vals.view(np.uint8))


def test_bitshuffle_parts_that_are_not_shuffled():
    """Parts not a multiple of 8 bytes (and of the type size) were stored as is."""
    payload = bytes(range(12))
    md = struct.pack("<II", 1, 12) + b"rest"
    rest, out, rec = reverse_bitshuffle(FilterSpec(8), mv(md), mv(payload), stage("INT32"))
    assert bytes(out) == payload and bytes(rest) == b"rest" and rec["shuffled_parts"] == 0


# -- XOR and SCALE_FLOAT (§3.3) ----------------------------------------------------------------


def test_xor_per_part():
    a = np.array([5, 3, 3, 0xFFFF], np.uint16)
    b = np.array([1, 1], np.uint16)
    enc = lambda v: np.concatenate([v[:1], v[1:] ^ v[:-1]]).tobytes()  # noqa: E731
    md = struct.pack("<III", 2, 8, 4)
    out = reverse_xor(FilterSpec(16), mv(md), mv(enc(a) + enc(b)), stage("INT16"))[1]
    assert bytes(out) == a.tobytes() + b.tobytes()
    with pytest.raises(StageError, match="parts total"):
        reverse_xor(FilterSpec(16), mv(md), mv(enc(a)), stage("INT16"))


def test_scale_float_computes_in_double_then_rounds():
    spec = FilterSpec(15, {"scale": 0.1, "offset": 1.0, "byte_width": 2})
    stored = np.array([0, 1, -32768, 32767], "<i2")
    md = struct.pack("<II", 1, stored.nbytes)
    out = reverse_scale_float(spec, mv(md), mv(stored.tobytes()), stage("FLOAT32"))[1]
    want = (stored.astype(np.float32).astype(np.float64) * 0.1 + 1.0).astype(np.float32)
    assert np.frombuffer(out, "<f4").tobytes() == want.tobytes()


def test_scale_float_hostile():
    spec = FilterSpec(15, {"scale": 1.0, "offset": 0.0, "byte_width": 3})
    with pytest.raises(StageError, match="byte width 3"):
        reverse_scale_float(spec, mv(struct.pack("<II", 1, 3)), mv(b"abc"), stage("FLOAT64"))
    spec = FilterSpec(15, {"scale": 1.0, "offset": 0.0, "byte_width": 1})
    with pytest.raises(StageError, match="can hold"):
        reverse_scale_float(spec, mv(struct.pack("<II", 1, 64)), mv(bytes(64)), stage("FLOAT64", limit=100))
    with pytest.raises(StageError, match="do not hold"):
        reverse_scale_float(FilterSpec(15, {}, b"\x00" * 5), mv(b""), mv(b""), stage("FLOAT64"))


# -- WEBP (§3.3) ------------------------------------------------------------------------------


def test_webp_bgr_order_and_broken_image():
    from PIL import Image

    rgb = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, "WEBP", lossless=True)
    img = buf.getvalue()
    md = struct.pack("<II", 1, len(img))
    spec = FilterSpec(18, {"quality": 100.0, "format": "BGR", "lossless": True, "y_extent": 4, "x_extent": 15})
    rest, out, rec = reverse_webp(spec, mv(md), mv(img), stage("UINT8"))
    assert bytes(out) == rgb[..., ::-1].tobytes()
    assert rec["images"][0]["width"] == 5 and rec["images"][0]["height"] == 4
    spec_rgba = FilterSpec(18, dict(spec.options, format="RGBA"))
    out = reverse_webp(spec_rgba, mv(md), mv(img), stage("UINT8"))[1]
    assert bytes(out) == np.concatenate([rgb, np.full((4, 5, 1), 255, np.uint8)], axis=2).tobytes()
    with pytest.raises(StageError, match="does not decode"):
        reverse_webp(spec, mv(md), mv(b"RIFF" + img[4:20] + bytes(len(img) - 20)), stage("UINT8"))
    with pytest.raises(StageError, match="can hold"):
        reverse_webp(spec, mv(md), mv(img), stage("UINT8", limit=10))


# -- types between filters and option parsing (§2.3, §3.2) -------------------------------------


def test_output_types():
    f32, u64, dt = BY_NAME["FLOAT32"], BY_NAME["UINT64"], BY_NAME["DATETIME_NS"]
    assert output_type(FilterSpec(15, {"byte_width": 2}), f32).name == "INT16"
    assert output_type(FilterSpec(16), f32).name == "INT32"
    assert output_type(FilterSpec(16), u64).name == "INT64"
    assert output_type(FilterSpec(19, {"reinterpret_type": "UINT16"}), dt).name == "UINT16"
    assert output_type(FilterSpec(6, {"reinterpret_type": "ANY"}), dt) is dt
    assert output_type(FilterSpec(6, {}), dt) is dt
    assert output_type(FilterSpec(7), u64) is u64


def test_options_by_name():
    assert decode_options(6, bytes([6]) + struct.pack("<i", -1) + bytes([1])) == {
        "compressor": "DOUBLE_DELTA", "level": -1, "reinterpret_type": "INT64"}
    assert decode_options(19, bytes([8]) + struct.pack("<i", 3)) == {"compressor": "DELTA", "level": 3}
    assert decode_options(7, struct.pack("<I", 64)) == {"max_window_size": 64}
    assert decode_options(15, struct.pack("<ddQ", 0.5, -1.0, 2)) == {
        "scale": 0.5, "offset": -1.0, "byte_width": 2}
    assert decode_options(18, struct.pack("<fBBHHxx", 50.0, 3, 0, 16, 64)) == {
        "quality": 50.0, "format": "RGBA", "lossless": False, "y_extent": 16, "x_extent": 64}


def test_pipeline_reversed_with_the_types_each_filter_saw():
    """XOR on FLOAT64 hands INT64 to BIT_WIDTH_REDUCTION, which therefore reduced it:
    one chunk built by hand from §2.2 and §3.3, reversed through unfilter_tile."""
    vals = np.array([1.5, 2.5, 2.5, -0.25], "<f8")
    ints = vals.view("<i8")
    xored = np.concatenate([ints[:1], ints[1:] ^ ints[:-1]])
    vmin = int(xored.min())
    rel = (xored - vmin).astype(np.uint64)
    bits = 64 if int(rel.max()) >= 2 ** 31 else 32
    stored = xored.tobytes() if bits == 64 else (xored - vmin).astype("<i4").tobytes()
    bwr_md = struct.pack("<II", 32, 1) + struct.pack("<q", vmin) + struct.pack("<BI", bits, 32)
    xor_md = struct.pack("<II", 1, 32)
    pipe = FilterPipeline(65536, (FilterSpec(16), FilterSpec(7)))
    ctx = FilterContext(BY_NAME["FLOAT64"], 8, 22)

    def tile(md: bytes) -> bytes:
        return struct.pack("<Q", 1) + struct.pack("<III", 32, len(stored), len(md)) + md + stored

    decoded = unfilter_tile(tile(bwr_md + xor_md), "a0.tdb", 0, pipe, ctx, expected_size=32)
    assert decoded.data == vals.tobytes()
    assert decoded.chunks[0].stages[1]["element_type"] == "INT64"
    bad = bwr_md[:16] + bytes([24]) + bwr_md[17:]  # the window's bit width byte
    with pytest.raises(FormatError, match=r"filter BIT_WIDTH_REDUCTION \(position 1\).*bit width 24"):
        unfilter_tile(tile(bad + xor_md), "a0.tdb", 0, pipe, ctx, expected_size=32)
