"""Reversing each filter of a pipeline on one chunk (FORMAT.md §2.3, §3.3).

Each reverser takes the chunk's current (metadata, data) and returns the
(metadata, data) that the previous filter produced, plus a record of what the
stage stored (its header fields by name) for the tile's forensic view.
"""

from __future__ import annotations

import bz2
import hashlib
import struct
import threading
import zlib

import lz4.block
import numpy as np
import zstandard

from .datatypes import Datatype
from .errors import FormatError
from .filters import FilterPipeline, FilterSpec


class UnsupportedFilter(FormatError):
    """A filter this version of tdbfs cannot reverse; the filter is named in the message."""


class StageError(Exception):
    """Raised inside a reverser; turned into a FormatError with file and offset by reverse_chunk."""

    def __init__(self, message: str, md_pos: int | None = None):
        super().__init__(message)
        self.md_pos = md_pos


_local = threading.local()


def _zstd() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "zstd", None)
    if d is None:
        d = _local.zstd = zstandard.ZstdDecompressor()
    return d


def _read_u32s(md: memoryview, pos: int, n: int, what: str) -> tuple[tuple[int, ...], int]:
    if n < 0 or pos + 4 * n > len(md):
        raise StageError(f"{what}: {n} u32 fields need {4 * n} bytes, {len(md) - pos} remain", pos)
    return struct.unpack_from(f"<{n}I", md, pos), pos + 4 * n


# -- compressors: absorbing filters with per-part headers ----------------------

def _decompress(fid: int, part: memoryview, out_len: int) -> bytes:
    if fid == 2:
        out = _zstd().decompress(part, max_output_size=out_len) if out_len else b""
    elif fid == 1:
        d = zlib.decompressobj()
        out = d.decompress(part, out_len) if out_len else b""
    elif fid == 3:
        out = lz4.block.decompress(part, uncompressed_size=out_len) if out_len else b""
    elif fid == 5:
        d = bz2.BZ2Decompressor()
        out = d.decompress(bytes(part), max_length=out_len) if out_len else b""
    else:  # pragma: no cover - guarded by the caller
        raise StageError(f"no codec for filter {fid}")
    return out


def _rle_decode(part: memoryview, out_len: int, cell_size: int) -> bytes:
    """Classic RLE (§3.3): runs of `value[cell_size]` then a big-endian u16 run length."""
    run = cell_size + 2
    if len(part) % run:
        raise StageError(f"RLE part of {len(part)} bytes is not a whole number of {run}-byte runs")
    runs = np.frombuffer(part, np.uint8).reshape(-1, run)
    lengths = runs[:, -2].astype(np.int64) * 256 + runs[:, -1]
    if int(lengths.sum()) * cell_size != out_len:
        raise StageError(f"RLE runs expand to {int(lengths.sum()) * cell_size} bytes, the part header says {out_len}")
    return np.repeat(runs[:, :cell_size], lengths, axis=0).tobytes()


def _reverse_compressor(spec: FilterSpec, md: memoryview, data: memoryview, dtype: Datatype, limit: int,
                        cell_size: int = 1):
    (n_md, n_data), pos = _read_u32s(md, 0, 2, "compressor part counts")
    if n_md + n_data > len(md):
        raise StageError(f"compressor header claims {n_md}+{n_data} parts, more than its {len(md)} metadata bytes", 0)
    sizes, pos = _read_u32s(md, pos, 2 * (n_md + n_data), "compressor part sizes")
    unfiltered = sizes[0::2]
    filtered = sizes[1::2]
    if sum(filtered) != len(data):
        raise StageError(f"compressed parts total {sum(filtered)} bytes but the chunk data holds {len(data)}", 0)
    if sum(unfiltered) > limit:
        raise StageError(f"parts claim {sum(unfiltered)} decompressed bytes, more than the {limit} this chunk can hold", 0)
    outs = []
    at = 0
    for i, (u, f) in enumerate(zip(unfiltered, filtered)):
        try:
            if spec.id == 4:
                out = _rle_decode(data[at:at + f], u, cell_size)
            else:
                out = _decompress(spec.id, data[at:at + f], u)
        except (zstandard.ZstdError, zlib.error, OSError, ValueError, EOFError, lz4.block.LZ4BlockError) as exc:
            raise StageError(f"{spec.name} part {i} ({f} bytes at chunk data byte {at}) does not decompress: {exc}", 0)
        if len(out) != u:
            raise StageError(f"{spec.name} part {i} decompressed to {len(out)} bytes, its header says {u}", 0)
        outs.append(out)
        at += f
    record = {"metadata_parts": n_md, "data_parts": n_data,
              "parts": [{"unfiltered": u, "filtered": f} for u, f in zip(unfiltered, filtered)]}
    new_md = b"".join(outs[:n_md])
    new_data = b"".join(outs[n_md:])
    return memoryview(new_md), memoryview(new_data), record


# -- pass-through filters: a header in front of the metadata they received ----

def _part_list(md: memoryview, what: str):
    (nparts,), pos = _read_u32s(md, 0, 1, f"{what} part count")
    if nparts > len(md):
        raise StageError(f"{what} claims {nparts} parts, more than its metadata holds", 0)
    lens, pos = _read_u32s(md, pos, nparts, f"{what} part lengths")
    return lens, pos


def _reverse_byteshuffle(spec, md, data, dtype: Datatype, limit):
    lens, pos = _part_list(md, "BYTESHUFFLE")
    if sum(lens) != len(data):
        raise StageError(f"BYTESHUFFLE parts total {sum(lens)} bytes but the data holds {len(data)}", 0)
    s = dtype.size
    outs = []
    at = 0
    for ln in lens:
        part = np.frombuffer(data[at:at + ln], np.uint8)
        n = ln // s
        if s > 1 and n:
            body = part[:n * s].reshape(s, n).T.ravel()
            outs.append(body.tobytes() + part[n * s:].tobytes())
        else:
            outs.append(part.tobytes())
        at += ln
    return md[pos:], memoryview(b"".join(outs)), {"parts": list(lens), "type_size": s}


def _reverse_checksum(spec, md, data, dtype, limit):
    digest_len = 16 if spec.id == 12 else 32
    algo = "md5" if spec.id == 12 else "sha256"
    (n_md, n_data), pos = _read_u32s(md, 0, 2, f"{spec.name} part counts")
    entry = 8 + digest_len
    if (n_md + n_data) * entry > len(md) - pos:
        raise StageError(f"{spec.name} claims {n_md}+{n_data} checksums, more than its metadata holds", 0)
    entries = []
    for _ in range(n_md + n_data):
        (nbytes,) = struct.unpack_from("<Q", md, pos)
        entries.append((nbytes, bytes(md[pos + 8:pos + entry])))
        pos += entry
    rest = md[pos:]
    checks = []
    failures = []
    streams = [(rest, entries[:n_md], "metadata"), (data, entries[n_md:], "data")]
    for stream, ents, kind in streams:
        at = 0
        for i, (nbytes, expected) in enumerate(ents):
            if at + nbytes > len(stream):
                raise StageError(f"{spec.name} {kind} part {i} covers {nbytes} bytes at {at}, past the {len(stream)} bytes there", 0)
            computed = hashlib.new(algo, stream[at:at + nbytes]).digest()
            ok = computed == expected
            checks.append({"part": f"{kind} {i}", "bytes": nbytes, "expected": expected.hex(),
                           "computed": computed.hex(), "ok": ok})
            if not ok:
                failures.append(f"{spec.name} mismatch on {kind} part {i}: expected {expected.hex()}, computed {computed.hex()}")
            at += nbytes
    return rest, data, {"checksums": checks, "_failures": failures}


def _reverse_noop(spec, md, data, dtype, limit):
    return md, data, {}


REVERSERS = {
    0: _reverse_noop,
    1: _reverse_compressor, 2: _reverse_compressor, 3: _reverse_compressor, 5: _reverse_compressor,
    4: _reverse_compressor,
    9: _reverse_byteshuffle,
    12: _reverse_checksum, 13: _reverse_checksum,
}


def output_type(spec: FilterSpec, dtype: Datatype) -> Datatype:
    """The datatype a filter hands to the next one (§2.3): all filters reversed here keep it."""
    return dtype


def reverse_chunk(md: memoryview, data: memoryview, header, pipeline: FilterPipeline, ctx, file: str, structure: str):
    """Unfilter one chunk. Returns (bytes, stage records in pipeline order, checksum failures)."""
    types = [ctx.datatype]
    for spec in pipeline.filters:
        types.append(output_type(spec, types[-1]))
    limit = 2 * header.unfiltered_size + (1 << 20)
    stages: list[dict] = []
    failures: list[str] = []
    for i in range(len(pipeline.filters) - 1, -1, -1):
        spec = pipeline.filters[i]
        rev = REVERSERS.get(spec.id)
        if rev is None:
            raise UnsupportedFilter(file, structure, header.offset,
                                    f"filter {spec.name} (id {spec.id}, position {i} of the pipeline) is not supported yet")
        if spec.id == 4 and ctx.var_strings:
            raise UnsupportedFilter(file, structure, header.offset,
                                    "filter RLE on var-sized string data (offsets rebuilt from the runs) "
                                    "is not supported yet")
        try:
            if spec.id == 4:
                md, data, record = rev(spec, md, data, types[i], limit, ctx.cell_size)
            else:
                md, data, record = rev(spec, md, data, types[i], limit)
        except StageError as exc:
            raise FormatError(file, structure, header.metadata_offset,
                              f"chunk {header.index}, filter {spec.name} (position {i}): {exc}") from None
        failures.extend(record.pop("_failures", []))
        stages.append({"filter": spec.name, "position": i, **record})
    if len(md):
        raise FormatError(file, structure, header.metadata_offset,
                          f"chunk {header.index}: {len(md)} metadata bytes left over after reversing every filter")
    stages.reverse()
    return data, stages, failures
