"""SCALE_FLOAT (docs/format.md §3.3): floats stored as round((x - offset) / scale) in signed
integers of `byte_width` bytes. Lossy: the reverse gives TileDB's read, not the value written.

Header `u32 nparts, nparts x u32 stored_part_len`. float_scaling_filter.cc reverses
with `T(scale * T(stored) + offset)`: the stored integer is first converted to the
float type T, the arithmetic is in double (scale and offset are doubles), and the
result is rounded to T.
"""

from __future__ import annotations

import numpy as np

from .common import Stage, StageError, check_parts_cover, part_list
from .records import summarise


def reverse_scale_float(spec, md, data, stage: Stage):
    opts = spec.options
    if "byte_width" not in opts:
        raise StageError(f"SCALE_FLOAT options ({len(spec.raw_options)} bytes) do not hold scale, offset and byte width", 0)
    width, scale, offset = opts["byte_width"], opts["scale"], opts["offset"]
    if width not in (1, 2, 4, 8):
        raise StageError(f"SCALE_FLOAT byte width {width} is not 1, 2, 4 or 8", 0)
    s = stage.datatype.size
    if s not in (4, 8):
        raise StageError(f"SCALE_FLOAT reverses to a float type, not {stage.datatype.name}", 0)
    real = np.dtype("<f4" if s == 4 else "<f8")
    stored_dt = np.dtype(f"<i{width}")
    lens, pos = part_list(md, "SCALE_FLOAT")
    check_parts_cover(lens, data, "SCALE_FLOAT")
    for i, ln in enumerate(lens):
        if ln % width:
            raise StageError(f"SCALE_FLOAT part {i} of {ln} bytes is not whole {width}-byte integers", 0)
    if len(data) // width * s > stage.limit:
        raise StageError(f"SCALE_FLOAT would restore {len(data) // width * s} bytes, more than the {stage.limit} "
                         "this chunk can hold", 0)
    # Parts are consecutive and each is whole integers, so all parts convert in one go.
    stored = np.frombuffer(data, stored_dt)
    values = (stored.astype(real).astype(np.float64) * scale + offset).astype(real)
    record = {"scale": scale, "offset": offset, "byte_width": width, "float_type": f"FLOAT{8 * s}",
              "parts": list(lens[:65])}
    summarise(record, "parts", len(lens))
    return md[pos:], memoryview(values.tobytes()), record
