"""The AES-256-GCM key of an encrypted array: how its bytes are told and how it is held. Where it comes
from (a key file, the environment) is the front ends' business: tdbfs/frontend/keys.py.

Kept apart from the decryption (encryption.py) so that reading a key costs no numpy import:
`tdbfs mount` reads it before it starts the daemon.
"""

from __future__ import annotations

import base64
import binascii

from ...errors import TdbfsError

KEY_BYTES = 32


class BadKeyError(TdbfsError, ValueError):
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

    def reveal(self) -> bytes:
        """The 32 bytes, for the one hand-over that needs them: `tdbfs mount` to its daemon, by a pipe."""
        return self._key

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
