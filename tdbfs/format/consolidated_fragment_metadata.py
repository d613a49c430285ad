"""Consolidated fragment metadata (docs/format.md §7.2): the payload of a `.meta` generic tile.

```
u32 n_fragments
n x { u64 name_len, name, u64 footer_offset }
footers back to back
```

`footer_offset` is relative to the start of the payload. The footers are the
fragments' §5.4 footers without the trailing `footer_len`; each one ends where
the next begins (or at the end of the payload) and is decoded with
`fragment_metadata.parse_footer(payload, file, schema, entry.footer_offset,
entry.footer_length, within=...)` once the caller has picked its schema (for
v>=10 `fragment_metadata.peek_footer_schema_name` names it);
`decode_consolidated_footers` does both for every entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..problem import Problem
from .cursor import Cursor
from .errors import FormatError
from .errors import safety_net
from .fragment_metadata import Footer, parse_footer, peek_footer_schema_name

STRUCTURE = "consolidated fragment metadata"


@dataclass(frozen=True)
class ConsolidatedFooter:
    """One entry of a `.meta` file: which fragment, where its footer is, and the footer's bytes."""

    name: str                 # as stored: folder name (v>=9) or absolute URI (older)
    footer_offset: int        # offset of the footer in the payload
    footer: bytes             # the footer's bytes (no footer_len)
    entry_offset: int = 0     # payload offset of this entry's name_len field

    @property
    def footer_length(self) -> int:
        return len(self.footer)

    @property
    def fragment_name(self) -> str:
        """The fragment's folder name, also when an older writer stored a URI."""
        return self.name.rstrip("/").rsplit("/", 1)[-1]

    def __iter__(self):
        """Unpacks as `(name, footer_offset, footer)`."""
        return iter((self.name, self.footer_offset, self.footer))


@safety_net(STRUCTURE)
def parse_consolidated_fragment_metadata(payload, file: str, *, within: str = STRUCTURE + " payload"
                                         ) -> list[ConsolidatedFooter]:
    """Entries of a `.meta` payload, in stored order, each with its footer's bytes.

    Footer offsets must lie between the end of the entry table and the end of
    the payload; a footer's length is the distance to the next larger offset
    (or to the end of the payload).
    """
    data = payload if isinstance(payload, (bytes, bytearray)) else bytes(payload)
    cur = Cursor(data, file, STRUCTURE, within=within)
    n = cur.u32_count(16, "fragment count", "fragment entries")
    entries = []
    for k in range(n):
        at = cur.pos
        name_len = cur.u64(f"entry {k} name length")
        name = cur.string(name_len, f"entry {k} name")
        off_at = cur.pos
        footer_offset = cur.u64(f"entry {k} footer offset")
        entries.append((at, name, footer_offset, off_at))
    table_end = cur.pos
    size = len(data)
    for k, (_, name, off, off_at) in enumerate(entries):
        if off < table_end or off > size:
            raise FormatError(file, STRUCTURE, off_at,
                              f"entry {k} ({name}): footer offset {off} is outside the footers "
                              f"(bytes {table_end}..{size})", within)
    ordered = sorted({off for _, _, off, _ in entries})
    if entries and ordered[0] != table_end:
        raise FormatError(file, STRUCTURE, table_end,
                          f"footers should start right after the entry table at {table_end}, "
                          f"the first offset is {ordered[0]}", within)
    ends = {off: (ordered[i + 1] if i + 1 < len(ordered) else size) for i, off in enumerate(ordered)}
    out = []
    for at, name, off, _ in entries:
        end = ends[off]
        if end == off:
            raise FormatError(file, STRUCTURE, off, f"footer of {name} is empty", within)
        out.append(ConsolidatedFooter(name, off, data[off:end], at))
    return out


def _name_version(fragment_name: str) -> int | None:
    parts = fragment_name[2:].split("_") if fragment_name.startswith("__") else []
    if len(parts) == 4 and parts[3].isdigit():
        return int(parts[3])
    if len(parts) == 3:
        return 4
    return None


@dataclass(frozen=True)
class DecodedFooter:
    """One entry of a `.meta` payload with its footer decoded, or what stopped the decoding."""

    entry: ConsolidatedFooter
    footer: Footer | None
    problem: Problem | None   # set when footer is None: what the FormatError found, or the missing schema


@safety_net(STRUCTURE)
def decode_consolidated_footers(payload, file: str, schema_by_name) -> tuple[DecodedFooter, ...]:
    """Every entry of a `.meta` payload with its footer decoded against the schema the footer names.

    `schema_by_name(name)` gives that ArraySchema ("" = the legacy `__array_schema.tdb`).
    A footer that cannot be decoded keeps its problem instead; the others stay readable.
    """
    within = STRUCTURE + " payload"
    out = []
    for e in parse_consolidated_fragment_metadata(payload, file, within=within):
        try:
            _, schema_name = peek_footer_schema_name(payload, file, e.footer_offset, within=within)
            schema = schema_by_name(schema_name or "")
            footer = parse_footer(payload, file, schema, e.footer_offset, e.footer_length,
                                  _name_version(e.fragment_name), within=within)
            out.append(DecodedFooter(e, footer, None))
        except FormatError as exc:
            out.append(DecodedFooter(e, None, exc.as_problem()))
        except (KeyError, LookupError, OSError, ValueError) as exc:
            out.append(DecodedFooter(e, None, Problem(file, STRUCTURE, e.footer_offset,
                                                      f"no schema for this footer: {exc}")))
    return tuple(out)
