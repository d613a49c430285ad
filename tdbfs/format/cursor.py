"""A bounded little-endian reader over bytes that raises FormatError with file and offset."""

from __future__ import annotations

import struct

from ..lazy import np
from .errors import FormatError

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


class Cursor:
    """Reads fields in order from `data`, checking every length before use.

    `file` and `structure` name what is being decoded for error messages;
    `base` is added to positions so that errors report offsets in the file
    even when `data` is a slice of it; `within` names a decoded payload when
    positions are not file offsets (for example a generic tile's payload).
    """

    __slots__ = ("data", "pos", "file", "structure", "base", "within")

    def __init__(self, data, file: str, structure: str, base: int = 0, within: str = "", pos: int = 0):
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.pos = pos
        self.file = file
        self.structure = structure
        self.base = base
        self.within = within

    # -- errors -----------------------------------------------------------
    def error(self, message: str, offset: int | None = None, structure: str | None = None) -> FormatError:
        at = self.pos if offset is None else offset
        return FormatError(self.file, structure or self.structure, self.base + at, message, self.within)

    @property
    def offset(self) -> int:
        """Position reported to users: file offset (or payload offset with `within`)."""
        return self.base + self.pos

    @property
    def remaining(self) -> int:
        # never negative, and nothing for a cursor placed outside the bytes (by a damaged offset)
        return len(self.data) - self.pos if 0 <= self.pos <= len(self.data) else 0

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def need(self, n: int, what: str) -> None:
        if not 0 <= self.pos <= len(self.data):
            # an offset read from the file placed the cursor outside the bytes at hand
            raise self.error(f"{what} would start at byte {self.base + self.pos}, outside the "
                             f"{len(self.data)} bytes there", offset=min(max(self.pos, 0), len(self.data)))
        if n < 0 or self.pos + n > len(self.data):
            raise self.error(f"{what} needs {n} bytes but only {self.remaining} remain")

    # -- fields -------------------------------------------------------------
    def _unpack(self, st: struct.Struct, what: str):
        pos = self.pos
        end = pos + st.size
        if pos < 0 or end > len(self.data):
            self.need(st.size, what)  # raises, worded as for any other read
        self.pos = end
        return st.unpack_from(self.data, pos)[0]

    def u8(self, what: str = "u8") -> int:
        return self._unpack(_U8, what)

    def u16(self, what: str = "u16") -> int:
        return self._unpack(_U16, what)

    def u32(self, what: str = "u32") -> int:
        return self._unpack(_U32, what)

    def i32(self, what: str = "i32") -> int:
        return self._unpack(_I32, what)

    def u64(self, what: str = "u64") -> int:
        return self._unpack(_U64, what)

    def i64(self, what: str = "i64") -> int:
        return self._unpack(_I64, what)

    def f32(self, what: str = "f32") -> float:
        return self._unpack(_F32, what)

    def f64(self, what: str = "f64") -> float:
        return self._unpack(_F64, what)

    def bool(self, what: str = "bool") -> bool:
        return self.u8(what) != 0

    def bytes(self, n: int, what: str = "bytes") -> bytes:
        self.need(n, what)
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self, n: int, what: str = "string") -> str:
        raw = self.bytes(n, what)
        return raw.decode("utf-8", errors="backslashreplace")

    def skip(self, n: int, what: str = "bytes") -> None:
        self.need(n, what)
        self.pos += n

    def count(self, n: int, item_size: int, what: str, at: int | None = None) -> int:
        """Check that `n` items of `item_size` bytes fit in what remains before allocating (or looping);
        `at`: where `n` was read, which the error then points at (the number that is wrong)."""
        if item_size and n > self.remaining // item_size:
            raise self.error(f"{what}: count {n} of {item_size}-byte items exceeds the {self.remaining} bytes "
                             "that remain", at)
        return n

    def u32_count(self, item_size: int, field: str, items: str) -> int:
        """A u32 count of `items` of `item_size` bytes each, checked against what remains."""
        at = self.pos
        return self.count(self.u32(field), item_size, items, at)

    def u64_count(self, item_size: int, field: str, items: str) -> int:
        """A u64 count of `items` of `item_size` bytes each, checked against what remains."""
        at = self.pos
        return self.count(self.u64(field), item_size, items, at)

    def array(self, n: int, dtype, what: str):
        """`n` values of numpy `dtype` (little-endian string such as '<u8') as a read-only array."""
        dt = np.dtype(dtype)
        self.count(n, dt.itemsize, what)
        self.need(n * dt.itemsize, what)
        out = np.frombuffer(self.data, dt, count=n, offset=self.pos)
        self.pos += n * dt.itemsize
        return out

    def u64s(self, n: int, what: str) -> tuple[int, ...]:
        """`n` little-endian u64 values as ints (length checked before use). `struct`, not
        numpy: the footer's lists are read at start-up, before numpy is imported (tdbfs/lazy.py)."""
        self.count(n, 8, what)
        self.need(8 * n, what)
        out = struct.unpack_from(f"<{n}Q", self.data, self.pos)
        self.pos += 8 * n
        return out

    def u64_array(self, n: int, what: str):
        """`n` little-endian u64 values as a numpy array (length checked before use)."""
        return self.array(n, "<u8", what)

    def sub(self, n: int, structure: str) -> "Cursor":
        """A cursor over the next `n` bytes, reporting offsets in the same space."""
        self.need(n, structure)
        start = self.pos
        self.pos += n
        view = memoryview(self.data)[start:start + n] if not isinstance(self.data, bytes) else self.data[start:start + n]
        return Cursor(view, self.file, structure, self.base + start, self.within)


class TracingCursor(Cursor):
    """A Cursor that also appends `(what, start, end)` to `trace` for every field it reads,
    offsets reported like errors (file offsets, or payload offsets with `within`).

    Byte maps use it to place each decoded field; plain decoding keeps the untraced Cursor.
    """

    __slots__ = ("trace",)

    def __init__(self, data, file: str, structure: str, base: int = 0, within: str = "", pos: int = 0,
                 trace: list | None = None):
        super().__init__(data, file, structure, base, within, pos)
        self.trace = [] if trace is None else trace

    def _note(self, what: str, start: int) -> None:
        self.trace.append((what, self.base + start, self.base + self.pos))

    def _unpack(self, st: struct.Struct, what: str):
        start = self.pos
        value = super()._unpack(st, what)
        self._note(what, start)
        return value

    def bytes(self, n: int, what: str = "bytes") -> bytes:
        start = self.pos
        out = super().bytes(n, what)
        self._note(what, start)
        return out

    def array(self, n: int, dtype, what: str):
        start = self.pos
        out = super().array(n, dtype, what)
        self._note(what, start)
        return out

    def u64s(self, n: int, what: str) -> tuple[int, ...]:
        start = self.pos
        out = super().u64s(n, what)
        self._note(what, start)
        return out

    def sub(self, n: int, structure: str) -> "TracingCursor":
        self.need(n, structure)
        start = self.pos
        self.pos += n
        view = memoryview(self.data)[start:start + n] if not isinstance(self.data, bytes) else self.data[start:start + n]
        return TracingCursor(view, self.file, structure, self.base + start, self.within, trace=self.trace)
