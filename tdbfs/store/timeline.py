"""What happened to an array, and when, as far as its files tell (`timeline.csv`).

Every time is a TileDB timestamp taken from a file's name (docs/format.md §6.1): milliseconds since
the epoch, the `t2` end of the name's `t1..t2` range. TileDB keeps no other record of time: a file's
mtime says when it was copied or touched, not when TileDB wrote it, and vacuuming records no time at
all. Only listings and names are read, plus the small commit-side files (`.vac`, `.ign`, `.con`,
`.del`, `.upd`) and the `__meta` files, each parsed once by the store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..format.names import try_parse_name
from .array_store import LEGACY_SCHEMA, SCHEMA_DIR
from .legacy0x_fragment import FRAGMENT_MARKER

#: event kinds, in the order events that share a time are listed (cause before consequence)
EVENTS = (
    "schema_created",            # the first schema file
    "schema_evolved",            # every later schema file (schema evolution)
    "fragment_written",          # a fragment folder; t1 < t2 for a consolidation's output
    "fragment_committed",        # a .wrt/.ok marker, or a .wrt entry of a .con file
    "delete",                    # a .del commit, or a .del entry of a .con file
    "update",                    # a .upd commit
    "metadata_written",          # a __meta file; t1 < t2 for a metadata consolidation's output
    "fragment_consolidated",     # a fragment a .vac lists, `into` the fragment the .vac is named after
    "fragment_vacuumed",         # a fragment a .vac lists that is no longer there
    "metadata_consolidated",     # a __meta file a __meta .vac lists, `into` the file it is named after
    "metadata_vacuumed",         # a __meta file such a .vac lists that is no longer there
    "commit_consolidated",       # an entry of a .con file, `into` the .con file
    "commit_ignored",            # an entry of a .ign file: a .con entry TileDB no longer counts
    "fragment_meta_consolidated",  # a __fragment_meta .meta file (the footers of the fragments in t1..t2)
)
_RANK = {kind: i for i, kind in enumerate(EVENTS)}

VACUUMED_DETAIL = "no longer on disk; TileDB records no time of vacuuming: this is the earliest it happened"


@dataclass(frozen=True)
class Event:
    time_ms: int | None      # when (the t2 of the recording file's name); None: the name holds no time
    event: str               # one of EVENTS
    subject: str             # the fragment, schema, metadata file or commit the event is about
    file: str                # the file (or fragment folder) that records it, relative to the array
    t1: int | None = None    # the timestamp range of `subject`'s name
    t2: int | None = None
    into: str = ""           # consolidations: what `subject` was consolidated into
    detail: str = ""
    condition: object = None  # delete/update: the decoded condition (format.commits.ConditionCommit)

    @property
    def sort_key(self) -> tuple:
        return (-1 if self.time_ms is None else self.time_ms, _RANK[self.event], self.subject, self.file)


def timeline(store) -> list[Event]:
    """Every event the array's files record, in time order; ties in the order of EVENTS, then by
    subject and file."""
    if store.legacy0x_layout == "array":
        events = _legacy0x_events(store)
    else:
        events = (_schema_events(store) + _fragment_events(store) + _commit_events(store)
                  + _metadata_events(store) + _fragment_meta_events(store))
    return sorted(events, key=lambda e: e.sort_key)


def distinct_times(events: list[Event]) -> list[int]:
    return sorted({e.time_ms for e in events if e.time_ms is not None})


def _stem(rel: str) -> str:
    base = os.path.basename(rel.rstrip("/"))
    n = try_parse_name(base)
    return n.stem if n else base


_OWN_T2 = object()


def _event(kind: str, rel: str, subject: str | None = None, *, named: str | None = None,
           parsed=_OWN_T2, time_ms=_OWN_T2, **kw) -> Event:
    """An event recorded by `rel` about `subject` (default: rel's own name without its extension).
    t1, t2 are those of the name `named` (default: `subject`), or of `parsed` when the caller has
    parsed that name already; the time is their t2 unless given."""
    subject = subject if subject is not None else _stem(rel)
    # try_parse_name keeps only the last few thousand names: at 100,000 fragments a name parsed by an
    # earlier pass is gone, so a name parsed here is handed on rather than parsed again
    n = try_parse_name(named or subject) if parsed is _OWN_T2 else parsed
    t1, t2 = (n.t1, n.t2) if n else (None, None)
    return Event(t2 if time_ms is _OWN_T2 else time_ms, kind, subject, rel, t1, t2, **kw)


def _schema_events(store) -> list[Event]:
    files = store.schema_files()
    # the legacy schema, listed first when there is one, is older than any __schema/ file
    timed = [f for f in files if f.startswith(SCHEMA_DIR + "/")]
    first = LEGACY_SCHEMA if LEGACY_SCHEMA in files else min(timed, key=_time_key, default=None)
    out = []
    for rel in files:
        kind = "schema_created" if rel == first else "schema_evolved"
        if rel == LEGACY_SCHEMA:
            out.append(Event(None, kind, rel, rel, detail="__array_schema.tdb has no time in its name"))
        else:
            out.append(_event(kind, rel))
    return out


def _time_key(rel: str) -> tuple:
    n = try_parse_name(os.path.basename(rel))
    return (0, n.t1, n.t2, n.stem) if n else (1, 0, 0, rel)


def _fragment_events(store) -> list[Event]:
    out = []
    # a .vac is named after the fragment the fragments it lists went into (ArrayDirectory::get_vacuum_uri)
    consolidated_into = {_stem(rel) for rel in store.commit_files() if rel.endswith(".vac")}
    for rel in store.fragment_paths():
        name = os.path.basename(rel)
        n = try_parse_name(name)
        detail = ""
        if n and n.t1 < n.t2:
            detail = f"the output of a consolidation of {n.t1}..{n.t2}"
            if name not in consolidated_into:
                detail += "; no .vac names it: the fragments it replaced are vacuumed"
        out.append(_event("fragment_written", rel, name, parsed=n, detail=detail))
    return out


def _commit_events(store) -> list[Event]:
    out = []
    live = {os.path.basename(p) for p in store.fragment_paths()}
    for rel in store.commit_files():
        base = os.path.basename(rel)
        n = try_parse_name(base)   # what _stem(rel) parses: the extension goes, t1 and t2 stay
        stem = n.stem if n else base
        if base.endswith((".wrt", ".ok")):
            out.append(_event("fragment_committed", rel, stem, parsed=n,
                              detail="time: the t2 of its name, not the marker's mtime"))
        elif base.endswith((".del", ".upd")):
            kind = "delete" if base.endswith(".del") else "update"
            condition = store.attempt(lambda rel=rel: store.condition(rel), rel, f"{kind} condition")
            out.append(_event(kind, rel, stem, parsed=n, condition=condition))
        elif base.endswith(".vac"):
            entries = store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file") or []
            out += _consolidated(rel, stem, entries, live, "fragment")
        elif base.endswith(".con"):
            out += _consolidated_commits(store, rel, stem)
        elif base.endswith(".ign"):
            entries = store.attempt(lambda rel=rel: store.ignore_file(rel), rel, "ignore file") or []
            for entry in entries:
                out.append(_event("commit_ignored", rel, os.path.basename(entry), named=_stem(entry),
                                  time_ms=_time_of(stem)))
    return out


def _time_of(name: str) -> int | None:
    n = try_parse_name(name)
    return n.t2 if n else None


def _consolidated(rel: str, into: str, entries: list[str], live: set, what: str) -> list[Event]:
    """The events of one .vac file: each entry was consolidated into `into` (the .vac's own name), and is
    vacuumed when it is gone."""
    out = []
    at = _time_of(into)
    for entry in entries:
        name = os.path.basename(entry)
        there = name in live
        out.append(_event(f"{what}_consolidated", rel, name, into=into, time_ms=at,
                          detail="still on disk (not vacuumed yet)" if there else "vacuumed"))
        if not there:
            out.append(_event(f"{what}_vacuumed", rel, name, time_ms=at, detail=VACUUMED_DETAIL))
    return out


def _consolidated_commits(store, rel: str, stem: str) -> list[Event]:
    con = store.attempt(lambda: store.consolidated_commits(rel), rel, "consolidated commits")
    conditions = store.attempt(lambda: store.embedded_conditions(rel), rel, "consolidated commits") or {}
    out = []
    for entry in con or ():
        name = os.path.basename(entry.path)
        marker = _stem(name)
        of = f"an entry of {os.path.basename(rel)}"
        if entry.kind in ("wrt", "ok"):
            out.append(_event("fragment_committed", rel, marker, detail=of))
        elif entry.kind == "del":
            out.append(_event("delete", rel, marker, condition=conditions.get(entry.offset), detail=of))
        out.append(_event("commit_consolidated", rel, name, named=marker, into=stem, time_ms=_time_of(stem)))
    return out


def _metadata_events(store) -> list[Event]:
    out = []
    files = store.metadata_files()
    live = {os.path.basename(f) for f in files}
    for rel in files:
        base = os.path.basename(rel)
        if base.endswith(".tmp"):
            continue   # a write not finished: TileDB skips it (docs/format.md §7.6)
        if base.endswith(".vac"):
            entries = store.attempt(lambda rel=rel: store.vacuum_file(rel), rel, "vacuum file") or []
            out += _consolidated(rel, _stem(rel), entries, live, "metadata")
            continue
        records = store.attempt(lambda rel=rel: store.array_metadata(rel), rel, "array metadata")
        out.append(_event("metadata_written", rel, base, detail=_metadata_detail(records, base)))
    return out


def _metadata_detail(records, base: str) -> str:
    if records is None:
        return "does not decode (see array.yaml problems)"
    put = [r.key for r in records if not r.deleted]
    gone = [r.key for r in records if r.deleted]
    parts = ([f"put {', '.join(put)}"] if put else []) + ([f"deleted {', '.join(gone)}"] if gone else [])
    n = try_parse_name(base)
    if n and n.t1 < n.t2:
        parts.insert(0, f"the output of a consolidation of {n.t1}..{n.t2}")
    return "; ".join(parts)


def _fragment_meta_events(store) -> list[Event]:
    return [_event("fragment_meta_consolidated", rel,
                   detail="footers of the fragments in the name's range, read by TileDB instead of their own")
            for rel in store.fragment_meta_files()]


def _legacy0x_events(store) -> list[Event]:
    """TileDB 0.x: a fragment's name holds the ms it was created at; its marker file commits it."""
    from ..format.errors import FormatError
    from ..format.legacy0x.names import parse_fragment_name
    out = []
    for rel in store.fragment_paths():
        try:
            ms = parse_fragment_name(rel).timestamp_ms
        except FormatError:
            ms = None
        hidden = "a hidden folder: the write never finished (0.x renames it into place when done)"
        out.append(Event(ms, "fragment_written", rel, rel, ms, ms, detail=hidden if rel.startswith(".") else ""))
        if store.isfile(f"{rel}/{FRAGMENT_MARKER}"):
            out.append(Event(ms, "fragment_committed", rel, f"{rel}/{FRAGMENT_MARKER}", ms, ms,
                             detail="time from the fragment's name"))
    return out

