"""CHECKSUM_MD5 and CHECKSUM_SHA256 (§3.3): data untouched, digests verified and reported."""

from __future__ import annotations

import hashlib
import struct

from .common import Stage, StageError, read_u32s


def reverse_md5(spec, md, data, stage: Stage):
    return _reverse_checksum(spec, md, data, "md5", 16)


def reverse_sha256(spec, md, data, stage: Stage):
    return _reverse_checksum(spec, md, data, "sha256", 32)


def _reverse_checksum(spec, md, data, algo: str, digest_len: int):
    (n_md, n_data), pos = read_u32s(md, 0, 2, f"{spec.name} part counts")
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
    for stream, ents, kind in ((rest, entries[:n_md], "metadata"), (data, entries[n_md:], "data")):
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
