"""AES-256-GCM (filter 11, FORMAT.md §3.3): the key, the part headers, and decryption.

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

import base64
import binascii
import os
import struct
from dataclasses import dataclass

from ..errors import FormatError
from .common import Stage, StageError, read_u32s

KEY_BYTES = 32
IV_BYTES = 12
TAG_BYTES = 16
PART_HEADER = 8 + IV_BYTES + TAG_BYTES

NO_KEY_MESSAGE = "the array is encrypted with AES-256-GCM; give the key with --key-file or TDBFS_KEY_FILE"
BAD_TAG_MESSAGE = "tag does not verify: wrong key or corrupt bytes"

#: environment variables the CLI reads the key from (the file path is preferred)
ENV_KEY_FILE = "TDBFS_KEY_FILE"
ENV_KEY = "TDBFS_ENCRYPTION_KEY"


class BadKeyError(ValueError):
    """A key file or value that does not hold a 32-byte key."""


class EncryptionKey:
    """32 key bytes that never show in repr/str."""

    __slots__ = ("_key", "_aead")

    def __init__(self, key: bytes):
        if len(key) != KEY_BYTES:
            raise BadKeyError(f"an AES-256-GCM key is {KEY_BYTES} bytes, not {len(key)}")
        # cryptography is imported only by arrays that have a key (~10 ms of start-up otherwise)
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        self._key = bytes(key)
        self._aead = AESGCM(self._key)

    def decrypt(self, iv: bytes, ciphertext, tag: bytes) -> bytes:
        return self._aead.decrypt(iv, bytes(ciphertext) + tag, None)

    def __repr__(self) -> str:
        return "EncryptionKey(<hidden>)"

    __str__ = __repr__

    def __reduce__(self):  # never pickled into anything
        raise TypeError("an encryption key is not serialisable")


def parse_key(raw: bytes, source: str) -> EncryptionKey:
    """The key in `raw` (a key file's bytes, or an environment value).

    Accepted, in this order: exactly 32 bytes (what TileDB users pass as a
    32-character string, or raw binary); the same followed by one newline;
    64 hexadecimal digits; base64 of 32 bytes (44 characters). The message on
    failure names `source` and sizes, never the content.
    """
    if len(raw) == KEY_BYTES:
        return EncryptionKey(raw)
    text = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1] if raw.endswith(b"\n") else raw
    if len(text) == KEY_BYTES:
        return EncryptionKey(text)
    stripped = text.strip()
    if len(stripped) == 2 * KEY_BYTES:
        try:
            return EncryptionKey(bytes.fromhex(stripped.decode("ascii")))
        except (ValueError, UnicodeDecodeError):
            pass
    if len(stripped) == 44:
        try:
            decoded = base64.b64decode(stripped, validate=True)
            if len(decoded) == KEY_BYTES:
                return EncryptionKey(decoded)
        except (binascii.Error, ValueError):
            pass
    raise BadKeyError(f"{source} does not hold an AES-256-GCM key: expected 32 bytes (a 32-character string), "
                    f"64 hex digits or 44 base64 characters, found {len(raw)} bytes")


def read_key_file(path: str) -> EncryptionKey:
    try:
        with open(path, "rb") as f:
            raw = f.read(4096)
    except OSError as exc:
        raise BadKeyError(f"cannot read the key file {path}: {exc.strerror}") from None
    return parse_key(raw, f"key file {path}")


def key_from_environment(environ=None) -> EncryptionKey | None:
    """The key named by TDBFS_KEY_FILE (a path) or given by TDBFS_ENCRYPTION_KEY, or None."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_KEY_FILE)
    if path:
        return read_key_file(path)
    value = env.get(ENV_KEY)
    if value:
        return parse_key(value.encode("utf-8"), f"${ENV_KEY}")
    return None


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
