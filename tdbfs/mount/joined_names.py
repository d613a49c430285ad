"""A big listing's names as libfuse takes them (encoded), kept as one bytes object joined by NUL.

100,000 fragment folders are 100,000 bytes objects as a list: splitting the listing `tdbfs mount`
hands its daemon into them, and measuring each again to write the readdir reply in bulk, were most
of the daemon's part of the first `ls fragments/` (docs/performance.md §5). Joined, the listing is
one object; when its names all have one length, as the fragments of an array written at the current
time do (`__<13 digits>_<13 digits>_<32 hex digits>_<version>`), the name at any index and the names
of any range are slices of it, found by arithmetic. A name never holds a NUL (POSIX), so the joint
is unambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence

SEPARATOR = b"\0"


class JoinedNames(Sequence):
    """`blob`: the names joined by NUL; `width`: the one length they all have, else None. Indexed,
    sliced or iterated it gives the names as bytes (split once on first need where their lengths
    differ). Callers only read it."""

    __slots__ = ("blob", "width", "_count", "_split")

    def __init__(self, blob: bytes, count: int):
        """`blob` must hold `count` names, none empty (see `of`)."""
        self.blob, self._count, self._split = blob, count, None
        width = blob.find(SEPARATOR) if count > 1 else len(blob)
        # one width for all: a joint after every `width` bytes, and the length that makes
        uniform = count > 0 and len(blob) == count * (width + 1) - 1 and (
            count == 1 or blob[width::width + 1] == SEPARATOR * (count - 1))
        self.width = width if uniform else None

    @classmethod
    def of(cls, blob: bytes, count: int) -> JoinedNames | None:
        """`blob` as `count` names, or None where it does not hold that many, or holds an empty one."""
        if count == 0:
            return cls(blob, 0) if not blob else None
        if blob.count(SEPARATOR) != count - 1:
            return None
        names = cls(blob, count)
        if names.width is not None:  # the joints where one width puts them, and no other: none empty
            return names if names.width > 0 else None
        if blob.startswith(SEPARATOR) or blob.endswith(SEPARATOR) or SEPARATOR * 2 in blob:
            return None
        return names

    @classmethod
    def encode(cls, names: Sequence[str]) -> JoinedNames | None:
        """`names` encoded (UTF-8, surrogateescape), in one join and one encode; None where a name is
        empty or holds a NUL, which no listing of a folder gives."""
        return cls.of("\0".join(names).encode("utf-8", "surrogateescape"), len(names))

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        if self.width is not None and self._split is None:
            if isinstance(index, int):
                if index < 0:
                    index += self._count
                if not 0 <= index < self._count:
                    raise IndexError(index)
                at = index * (self.width + 1)
                return self.blob[at:at + self.width]
            start, stop, step = index.indices(self._count)
            if step == 1:  # the rest of a listing from where a request starts: only those split
                return self.span(start, stop).split(SEPARATOR) if start < stop else []
        return self.split()[index]

    def __iter__(self):
        return iter(self.split())

    def split(self) -> list[bytes]:
        """The names as a list, made once."""
        if self._split is None:
            self._split = self.blob.split(SEPARATOR) if self._count else []
        return self._split

    def span(self, start: int, stop: int) -> bytes:
        """Names `start` to `stop` (exclusive), still joined by NUL; only where `width` is known."""
        step = self.width + 1
        return self.blob[start * step:stop * step - 1]

    def decoded(self) -> list[str]:
        """The names as str, in one decode and one split."""
        return self.blob.decode("utf-8", "surrogateescape").split("\0") if self._count else []

    def __repr__(self) -> str:
        return f"<{self._count} joined names, width {self.width}>"


def encoded_entries(listing) -> tuple[Sequence[bytes], int | list[int]]:
    """(names as libfuse takes them, st_mode of all or of each) of a folder listing that makes no node
    (views.common.LazyNodes): the names as the store's listings had them (the fragments `tdbfs mount`
    listed, prelisted.py), else all encoded in one join."""
    names, mode, encoded = listing.entries()
    if encoded is None:
        encoded = JoinedNames.encode(names)  # one encode for all (100,000 commit files)
    if encoded is None:
        encoded = [name.encode("utf-8", "surrogateescape") for name in names]
    return encoded, [mode(name) for name in names] if callable(mode) else mode
