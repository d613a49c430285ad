"""Timestamped names (docs/format.md §6.1) of fragments, schemas, metadata and commit files.

| form                              | name_version | format version             |
|-----------------------------------|--------------|----------------------------|
| `__<uuid32>_<ms>`                 | 1            | not in the name (≤ 2)      |
| `__<t1>_<t2>_<uuid32>`            | 2            | not in the name (3-4); also schema and `__meta` files |
| `__<t1>_<t2>_<label32>_<v>`       | 3            | `<v>`                      |

Known extensions (`.wrt .ok .del .upd .vac .con .ign .meta .tmp`) are stripped
first. Timestamps are milliseconds since the epoch; `t1 > t2` is rejected.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from .errors import FormatError
from .errors import safety_net

EXTENSIONS = (".wrt", ".ok", ".del", ".upd", ".vac", ".con", ".ign", ".meta", ".tmp")
U64_MAX = (1 << 64) - 1

_HEX32 = re.compile(r"[0-9a-fA-F]{32}\Z")
_DIGITS = re.compile(r"[0-9]+\Z")


@dataclass(frozen=True)
class FragmentName:
    name: str                  # the name as given (last path component, extension included)
    stem: str                  # without the extension
    extension: str             # "" or one of EXTENSIONS
    t1: int                    # ms since the epoch
    t2: int
    uuid: str                  # uuid32 / label32 as written
    format_version: int | None  # the `_<v>` suffix, None when the name has none
    name_version: int          # 1, 2 or 3 (see module doc)

    # ISO 8601 UTC, None when out of datetime's range; worked out when shown (a timeline of 100,000
    # fragments parses 200,000 names and shows none of these)
    @property
    def t1_iso(self) -> str | None:
        return iso8601_ms(self.t1)

    @property
    def t2_iso(self) -> str | None:
        return iso8601_ms(self.t2)

    @property
    def timestamp_range(self) -> tuple[int, int]:
        return (self.t1, self.t2)

    @property
    def assumed_format_version(self) -> int:
        """The format version TileDB assumes for this name (FragmentID): 2, 4 or the suffix."""
        if self.format_version is not None:
            return self.format_version
        return 2 if self.name_version == 1 else 4

    @property
    def sort_key(self) -> tuple:
        return (self.t1, self.t2, self.stem)


# Names of schema, metadata and commit files decode to the same record.
TimestampedName = FragmentName


def iso8601_ms(ms: int) -> str | None:
    """Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`, None if out of range."""
    day, ms_of_day = divmod(ms, 86_400_000)
    date = _date_of_day(day)
    if date is None:
        return None
    seconds, milli = divmod(ms_of_day, 1000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{date}T{hours:02d}:{minutes:02d}:{seconds:02d}.{milli:03d}Z"


@functools.lru_cache(maxsize=1024)
def _date_of_day(day: int) -> str | None:
    """`YYYY-MM-DD` of a day since the epoch, None out of datetime's range. Names of one array share a
    few days, and strftime for each of the 800,000 times of a 100,000-fragment timeline took 2 s."""
    try:
        return datetime.fromtimestamp(day * 86_400, tz=timezone.utc).strftime("%Y-%m-%d")
    except (OverflowError, OSError, ValueError):
        return None


def split_extension(name: str) -> tuple[str, str]:
    for ext in EXTENSIONS:
        if name.endswith(ext) and len(name) > len(ext):
            return name[:-len(ext)], ext
    return name, ""


def _last_component(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


#: the form TileDB writes today, `__<t1>_<t2>_<label32>_<v>`, read in one match; anything else, or a
#: number out of range, goes the long way, which says what is wrong and where
_FORMAT_3 = re.compile(r"__([0-9]{1,20})_([0-9]{1,20})_([0-9a-fA-F]{32})_([0-9]{1,10})\Z")


@safety_net("name", file_arg="name")
def _parse(name: str, structure: str) -> FragmentName:
    base = _last_component(name)
    stem, ext = split_extension(base)
    m = _FORMAT_3.match(stem)
    if m is not None:
        t1, t2, fmt = int(m[1]), int(m[2]), int(m[4])
        if t1 <= t2 <= U64_MAX and fmt <= 0xFFFFFFFF:
            return FragmentName(base, stem, ext, t1, t2, m[3], fmt, 3)

    def fail(pos: int, message: str) -> FormatError:
        return FormatError(base, structure, pos, message)

    if not stem.startswith("__"):
        raise fail(0, "a timestamped name starts with '__'")
    parts = stem[2:].split("_")
    # character offset of each part within `base`
    starts, pos = [], 2
    for p in parts:
        starts.append(pos)
        pos += len(p) + 1

    def number(i: int, what: str) -> int:
        text = parts[i]
        if not _DIGITS.match(text):
            raise fail(starts[i], f"{what} {text!r} is not a decimal number")
        value = int(text)
        if value > U64_MAX:
            raise fail(starts[i], f"{what} {value} does not fit in 64 bits")
        return value

    def label(i: int) -> str:
        text = parts[i]
        if not _HEX32.match(text):
            raise fail(starts[i], f"uuid/label {text!r} is not 32 hexadecimal digits")
        return text

    if len(parts) == 2:
        uuid = label(0)
        t1 = t2 = number(1, "timestamp")
        fmt, name_version = None, 1
    elif len(parts) == 3:
        t1, t2 = number(0, "start timestamp"), number(1, "end timestamp")
        uuid = label(2)
        fmt, name_version = None, 2
    elif len(parts) == 4:
        t1, t2 = number(0, "start timestamp"), number(1, "end timestamp")
        uuid = label(2)
        fmt = number(3, "format version")
        if fmt > 0xFFFFFFFF:
            raise fail(starts[3], f"format version {fmt} does not fit in 32 bits")
        name_version = 3
    else:
        raise fail(0, f"{len(parts)} '_'-separated parts after '__' (expected 2, 3 or 4)")
    if t1 > t2:
        raise fail(starts[0], f"start timestamp {t1} is after end timestamp {t2}")
    return FragmentName(base, stem, ext, t1, t2, uuid, fmt, name_version)


def parse_fragment_name(name: str) -> FragmentName:
    """Parse a fragment folder name (or a marker named after one: `.ok`, `.wrt`, ...).

    Raises FormatError (file = the name, offset = character position) when the
    name does not follow the grammar.
    """
    return _parse(name, "fragment name")


def parse_timestamped_name(name: str) -> FragmentName:
    """Parse the name of a schema, metadata, commit, vacuum or consolidated-metadata file.

    Known extensions are stripped first. Raises FormatError like parse_fragment_name.
    """
    return _parse(name, "timestamped name")


@functools.lru_cache(maxsize=4096)   # timeline.csv and as_of/ parse the same names again and again
def try_parse_name(name: str) -> FragmentName | None:
    """Like parse_timestamped_name, but None for names that do not parse (for directory listings)."""
    try:
        return _parse(name, "timestamped name")
    except FormatError:
        return None
