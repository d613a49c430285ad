"""Damaged bytes never make a format parser misbehave (tests/format/hostile.py).

Every case must return or raise FormatError with an int offset, within a time
and a traced-memory bound. The default run is a few hundred seeded cases; set
TDBFS_HOSTILE_CASES (and TDBFS_HOSTILE_SEED) for a longer one.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import hostile  # noqa: E402

CASES = int(os.environ.get("TDBFS_HOSTILE_CASES", "600"))
SEED = int(os.environ.get("TDBFS_HOSTILE_SEED", "0"))


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    return hostile.build_targets(tmp_path_factory.mktemp("hostile"))


def test_targets_cover_every_structure(targets):
    names = " ".join(t.name for t in targets)
    for needle in ("schema", "enumeration", "array metadata", "condition", ".con", ".vac",
                   "consolidated fragment metadata", "footer", "R-tree", "tile_offsets", "tile_min",
                   "tile_sums", "tile 0", "legacy fragment metadata", "zero:schema", "zero:book-keeping",
                   "zero:tile", "name "):
        assert needle in names, needle


def test_valid_targets_decode(targets):
    """The undamaged bytes decode (a harness whose targets fail on valid input tests nothing)."""
    bad = [t.name for t in targets if hostile.check(t, t.data) is not None]
    assert not bad


def test_hostile_bytes(targets):
    failures = hostile.run(targets, CASES, SEED)
    assert not failures, f"{len(failures)} of {CASES} cases failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("value", hostile.HUGE)
def test_huge_footer_fields(targets, value):
    """u64 fields of footers set to a huge value, one at a time (the reported file_sizes[0] case):
    a seeded sample of positions, every position when TDBFS_HOSTILE_CASES asks for a long run."""
    failures = hostile.sweep_u64([t for t in targets if t.name.endswith(":footer only")], value,
                                 limit=None if CASES > 5000 else 150, seed=SEED)
    assert not failures, "\n".join(failures[:40])


# ---------------------------------------------------------------------------
# the failures the harness found, one test each


def _payload_target(targets, needle):
    for t in targets:
        if needle in t.name and t.name.endswith("(payload)"):
            return t
    pytest.skip(f"no target {needle}")


def test_pre_v6_cell_val_num_does_not_build_a_huge_fill(targets):
    """Formats < 6 store no fill value; the default one is cell_val_num copies of a value, so a
    damaged cell_val_num built gigabytes (seconds and MemoryError) before it was bounded."""
    import struct
    from tdbfs.format.errors import FormatError
    from tdbfs.format.schema import parse_schema
    t = _payload_target(targets, "v03:__array_schema.tdb")
    schema = parse_schema(t.data, "s")
    assert schema.version < 6
    attr = schema.attributes[0]
    at = attr.offset + 4 + len(attr.name.encode()) + 1
    assert struct.unpack_from("<I", t.data, at)[0] == attr.cell_val_num
    bad = t.data[:at] + struct.pack("<I", 0xF0000000) + t.data[at + 4:]
    assert hostile.check(t, bad) is None
    with pytest.raises(FormatError) as info:
        parse_schema(bad, "s")
    assert info.value.offset == at and "cell_val_num" in info.value.message


def test_zstd_frame_content_size_is_checked_before_allocating():
    """python-zstandard sizes its output by the frame's content size when the frame has one, whatever
    max_output_size says: a damaged content size allocated hundreds of MiB."""
    import tracemalloc
    import zstandard
    from tdbfs.format.reversers.common import StageError
    from tdbfs.format.reversers.compressors import zstd_decompress
    frame = bytearray(zstandard.ZstdCompressor().compress(b"abc" * 100))
    assert zstd_decompress(bytes(frame), 300) == b"abc" * 100
    frame[5] ^= 0x40  # inside the frame content size field (single-segment frame header)
    tracemalloc.start()
    try:
        with pytest.raises(Exception) as info:
            zstd_decompress(bytes(frame), 300)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert isinstance(info.value, (StageError, zstandard.ZstdError)) and peak < 1 << 20


def test_lz4_output_size_must_be_reachable():
    import lz4.block
    from tdbfs.format.reversers.common import StageError
    from tdbfs.format.reversers.compressors import lz4_decompress
    block = lz4.block.compress(b"x" * 1000, store_size=False)
    assert lz4_decompress(block, 1000) == b"x" * 1000
    with pytest.raises(StageError, match="cannot decode"):
        lz4_decompress(block, 1 << 40)


def test_footer_schema_name_must_be_a_file_name():
    """A NUL in the schema name reached open() in the schema lookup: ValueError (embedded null byte)."""
    import struct
    from tdbfs.format import fragment_metadata as fm
    from tdbfs.format.errors import FormatError
    name = b"__1_1_0123456789abcdef0123456789abcdef"
    footer = struct.pack("<IQ", 22, len(name)) + name
    assert fm.peek_footer_schema_name(footer, "f") == (22, name.decode())
    for bad in (b"\0", b"/", b"\\"):
        damaged = footer[:20] + bad + footer[21:]
        with pytest.raises(FormatError) as info:
            fm.peek_footer_schema_name(damaged, "f")
        assert info.value.offset == 12 and "not a file name" in info.value.message


def test_cursor_outside_the_bytes():
    """An offset past the end used to report a negative remaining count ("only -14282255 remain")."""
    from tdbfs.format import fragment_metadata as fm
    from tdbfs.format.errors import FormatError
    from tdbfs.format.tile import parse_chunk_headers
    with pytest.raises(FormatError) as info:
        fm.peek_footer_schema_name(b"abc", "f", 14282258)
    assert "outside the 3 bytes" in info.value.message and info.value.offset == 3
    with pytest.raises(FormatError) as info:
        parse_chunk_headers(b"x" * 40, "f", 3, base=10)   # before the bytes at hand
    assert "outside" in info.value.message


def test_safety_net_names_the_exception():
    from tdbfs.format.errors import FormatError, safety_net

    @safety_net("thing", offset_arg="offset")
    def parse(data, file, offset=0):
        return data[offset + 100]

    with pytest.raises(FormatError) as info:
        parse(b"abc", "f.tdb", offset=7)
    e = info.value
    assert (e.file, e.structure, e.offset) == ("f.tdb", "thing", 7)
    assert e.message.startswith(hostile.NET_PREFIX) and "IndexError" in e.message
