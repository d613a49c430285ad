"""BYTESHUFFLE and BITSHUFFLE (§3.3): pass-through filters with a part-length header."""

from __future__ import annotations

import numpy as np

from .common import Stage, check_parts_cover, part_list


def reverse_byteshuffle(spec, md, data, stage: Stage):
    lens, pos = part_list(md, "BYTESHUFFLE")
    check_parts_cover(lens, data, "BYTESHUFFLE")
    s = stage.datatype.size
    outs = []
    at = 0
    for ln in lens:
        part = np.frombuffer(data[at:at + ln], np.uint8)
        n = ln // s
        if s > 1 and n:
            # Bytes past the last whole element were copied unshuffled (blosc semantics).
            outs.append(part[:n * s].reshape(s, n).T.tobytes() + part[n * s:].tobytes())
        else:
            outs.append(part.tobytes())
        at += ln
    return md[pos:], memoryview(b"".join(outs)), {"parts": list(lens), "type_size": s}
