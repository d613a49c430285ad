"""AES-256-GCM (filter 11, docs/format.md §3.3): the key, the part headers, and decryption.

TileDB encrypts each part (metadata parts, then data parts) on its own with a
random 12-byte IV and no additional data, and keeps IV and 16-byte tag in its
header, which is never encrypted:

    md:   u32 n_md_parts, u32 n_data_parts,
          (n_md + n_data) x { u32 plain_len, u32 cipher_len, u8 iv[12], u8 tag[16] }
    data: ciphertexts of the metadata parts, then of the data parts

The key is the 32 bytes TileDB was given (`sm.encryption_key` is a 32-character
string whose bytes are the key). It is held in an `EncryptionKey`, whose repr
never shows it, so that it cannot end up in a log, a view or a traceback.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import FormatError
from .common import Stage, StageError, read_u32s
# the key itself lives in a module without numpy: `tdbfs mount` reads it before it starts the daemon
from .keys import KEY_BYTES, BadKeyError, EncryptionKey, parse_key  # noqa: F401

IV_BYTES = 12
TAG_BYTES = 16
PART_HEADER = 8 + IV_BYTES + TAG_BYTES

NO_KEY_MESSAGE = "the array is encrypted with AES-256-GCM; give the key with --key-file or TDBFS_KEY_FILE"
BAD_TAG_MESSAGE = "tag does not verify: wrong key or corrupt bytes"


@dataclass(frozen=True)
class PartHeader:
    kind: str          # "metadata" or "data"
    index: int
    plain_len: int
    cipher_len: int
    iv: bytes
    tag: bytes

    def to_dict(self) -> dict:
        return {"part": f"{self.kind} {self.index}", "plain_len": self.plain_len, "cipher_len": self.cipher_len,
                "iv": self.iv.hex(), "tag": self.tag.hex()}


def parse_parts(md) -> tuple[list[PartHeader], int]:
    """The part headers at the front of `md`, and where they end; lengths checked."""
    (n_md, n_data), pos = read_u32s(md, 0, 2, "AES_256_GCM part counts")
    if (n_md + n_data) * PART_HEADER > len(md) - pos:
        raise StageError(f"AES_256_GCM claims {n_md}+{n_data} parts, more than its {len(md)} metadata bytes hold", 0)
    parts = []
    for i in range(n_md + n_data):
        plain, cipher = struct.unpack_from("<II", md, pos)
        iv = bytes(md[pos + 8:pos + 8 + IV_BYTES])
        tag = bytes(md[pos + 8 + IV_BYTES:pos + PART_HEADER])
        kind, index = ("metadata", i) if i < n_md else ("data", i - n_md)
        parts.append(PartHeader(kind, index, plain, cipher, iv, tag))
        pos += PART_HEADER
    return parts, pos


def reverse_aes256gcm(spec, md, data, stage: Stage):
    parts, pos = parse_parts(md)
    if pos != len(md):
        # The filter absorbs the metadata it was given: nothing may follow its own header.
        raise StageError(f"AES_256_GCM header is {pos} bytes but the chunk metadata holds {len(md)}", pos)
    if sum(p.cipher_len for p in parts) != len(data):
        raise StageError(f"AES_256_GCM parts total {sum(p.cipher_len for p in parts)} bytes "
                         f"but the chunk data holds {len(data)}", 0)
    key = getattr(stage.ctx, "key", None)
    if key is None:
        raise StageError(NO_KEY_MESSAGE, 0)
    from cryptography.exceptions import InvalidTag
    md_out, data_out = [], []
    at = 0
    for p in parts:
        if p.cipher_len != p.plain_len:
            raise StageError(f"AES_256_GCM {p.kind} part {p.index}: GCM keeps lengths, "
                             f"but plain_len {p.plain_len} != cipher_len {p.cipher_len}", 0)
        try:
            plain = key.decrypt(p.iv, data[at:at + p.cipher_len], p.tag)
        except InvalidTag:
            raise StageError(f"AES_256_GCM {p.kind} part {p.index} ({p.cipher_len} bytes at chunk data byte {at}): "
                             f"{BAD_TAG_MESSAGE}", 0) from None
        (md_out if p.kind == "metadata" else data_out).append(plain)
        at += p.cipher_len
    record = {"parts": [dict(p.to_dict(), tag_ok=True) for p in parts]}
    return memoryview(b"".join(md_out)), memoryview(b"".join(data_out)), record


class EncryptedError(FormatError):
    """An encrypted structure read without a key (its message is NO_KEY_MESSAGE)."""
