"""XOR (docs/format.md §3.3): a pass-through filter over signed integers of the stage type's width.

Header `u32 nparts, nparts x u32 part_len`; each part holds `x0, x1^x0, x2^x1, ...`,
so a running XOR (np.bitwise_xor.accumulate) restores it.
"""

from __future__ import annotations

import numpy as np

from .common import Stage, StageError, check_parts_cover, part_list
from .deltas import unsigned
from .records import summarise


def reverse_xor(spec, md, data, stage: Stage):
    s = stage.datatype.size
    if s not in (1, 2, 4, 8):
        raise StageError(f"XOR cannot work on {stage.datatype.name} ({s}-byte values)", 0)
    lens, pos = part_list(md, "XOR")
    check_parts_cover(lens, data, "XOR")
    u = unsigned(s)
    src = np.frombuffer(data, np.uint8)
    outs = []
    at = 0
    for ln in lens:
        n = ln // s
        part = src[at:at + n * s].view(u)
        outs.append(np.bitwise_xor.accumulate(part).tobytes())
        # xor_part asserts whole values; bytes past them would never have been written
        outs.append(src[at + n * s:at + ln].tobytes())
        at += ln
    record = {"parts": list(lens[:65]), "type_size": s}
    summarise(record, "parts", len(lens))
    return md[pos:], memoryview(b"".join(outs)), record
