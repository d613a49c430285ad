"""A problem: what is wrong with an array, where. The one shape every layer reports in.

The format layer raises FormatError, which carries one; the store logs them (store/problems.py);
the views show `to_dict()` in YAML and `tdbfs check` prints `line()`, so the mount and check say
the same words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .text import shown

ERROR = "error"
#: a state TileDB itself leaves behind or ignores (consolidated but not vacuumed, extra files): reported,
#: but `tdbfs check` still exits 0
WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    file: str                   # relative to the array root
    structure: str              # the spec's name for what was being decoded or checked
    offset: int | None          # byte offset in `file`, or in the payload named by `within`; None for a whole file
    message: str
    severity: str = ERROR
    within: str = ""

    @property
    def key(self) -> tuple:
        """What makes two reports the same problem (the severity does not)."""
        return (self.file, self.structure, self.offset, self.message, self.within)

    def to_dict(self) -> dict:
        out = asdict(self)
        if not self.within:
            del out["within"]
        return out

    def printable(self) -> "Problem":
        """The problem with names that are not UTF-8 escaped, as the mount's YAML shows them."""
        return Problem(shown(self.file), shown(self.structure), self.offset, shown(self.message), self.severity,
                       shown(self.within))

    def line(self) -> str:
        p = self.printable()
        where = "-" if p.offset is None else str(p.offset)
        inside = f" ({p.within}, payload byte {p.offset})" if p.within else ""
        return f"{p.file}:{where}: {p.structure}{inside}: {p.message}"


def unique(*lists) -> list[Problem]:
    """The problems of several lists, each once, in the order first found."""
    seen: set = set()
    out = []
    for lst in lists:
        for p in lst:
            if p.key not in seen:
                seen.add(p.key)
                out.append(p)
    return out
