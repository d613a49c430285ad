"""0.x fragment folder names (docs/format-0x.md; Intel-HLS / GenomicsDB `Array::new_fragment_name`).

The writer names a fragment `__<writer id>_<ms since the epoch>`; the writer id is, by
version, a process id, a thread id (seed 004 shows it in hex, `0x7fff9c84b3c0`), a MAC
address followed by the pthread id, or (GenomicsDB) a uuid36 followed by the pthread id.
A leading `.` marks a fragment still being written (renamed away on finalize).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import FormatError
from ..errors import safety_net
from ..names import iso8601_ms

_UUID36 = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_MAC = re.compile(r"(?:[0-9a-fA-F]{2}[:-]?){5}[0-9a-fA-F]{2}")
_DIGITS = re.compile(r"[0-9]+\Z")


@dataclass(frozen=True)
class Legacy0xFragmentName:
    name: str
    hidden: bool                  # leading '.': not renamed into place yet
    writer_id: str                # everything between '__' and the last '_'
    writer_kind: str              # uuid+thread, mac+thread, thread (hex), process-or-thread
    uuid: str | None
    mac: str | None
    thread_id: int | None
    timestamp_ms: int
    timestamp_iso: str | None


@safety_net("fragment name", file_arg="name")
def parse_fragment_name(name: str) -> Legacy0xFragmentName:
    hidden = name.startswith(".")
    body = name[1:] if hidden else name
    start = 1 if hidden else 0
    if not body.startswith("__"):
        raise FormatError(name, "0.x fragment name", start, "a fragment name starts with '__' (or '.__')")
    writer, sep, ms = body[2:].rpartition("_")
    if not sep or not writer:
        raise FormatError(name, "0.x fragment name", start + 2, "no '<writer id>_<ms>' after '__'")
    if not _DIGITS.match(ms):
        raise FormatError(name, "0.x fragment name", len(name) - len(ms), f"timestamp {ms!r} is not a decimal number")
    uuid = mac = None
    thread = None
    m = _UUID36.match(writer)
    if m and _DIGITS.match(writer[m.end():] or "x"):
        kind, uuid, thread = "uuid+thread", m.group(0), int(writer[m.end():])
    elif writer.lower().startswith("0x") and re.fullmatch(r"0[xX][0-9a-fA-F]+", writer):
        kind, thread = "thread", int(writer, 16)
    elif _DIGITS.match(writer):
        kind, thread = "process-or-thread", int(writer)
    else:
        m = _MAC.match(writer)
        if m and _DIGITS.match(writer[m.end():] or "x"):
            kind, mac, thread = "mac+thread", m.group(0), int(writer[m.end():])
        else:
            kind = "unknown"
    ts = int(ms)
    return Legacy0xFragmentName(name, hidden, writer, kind, uuid, mac, thread, ts, iso8601_ms(ts))
