"""What a salvage did, fragment by fragment: `DEST/salvage.yaml`, and the totals `tdbfs salvage` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

REPORT_FILE = "salvage.yaml"
COPIED, REWRITTEN, LOST = "copied", "rewritten", "lost"


@dataclass(frozen=True)
class FragmentOutcome:
    fragment: str                   # relative path in the source (and in DEST when copied)
    outcome: str                    # COPIED, REWRITTEN or LOST
    cells: int = 0                  # copied: the cells its metadata counts
    problems: tuple[str, ...] = ()  # rewritten or lost: what the check found
    why: str = ""                   # lost: why nothing of it could be kept
    written: tuple[str, ...] = ()   # rewritten: the fragments written in DEST
    cells_kept: int = 0
    cells_lost: int = 0
    lost_tiles: tuple = ()          # rewrite.LostTile
    lost_detail: tuple[str, ...] = ()
    not_read: int = 0               # rewritten: cells a reader at T does not take (newer, deleted, superseded)
    note: str = ""

    def to_dict(self) -> dict:
        out: dict = {"fragment": self.fragment, "outcome": self.outcome}
        if self.outcome == COPIED:
            out["cells"] = self.cells
        if self.outcome == LOST:
            out["why"] = self.why
        if self.outcome == REWRITTEN:
            out.update(written=list(self.written), cells_kept=self.cells_kept, cells_lost=self.cells_lost,
                       lost_tiles=[_tile_dict(t) for t in self.lost_tiles])
            if self.lost_detail:
                out["lost_detail"] = list(self.lost_detail)
            if self.not_read:
                out["cells_not_read_at_T"] = self.not_read
        if self.problems:
            out["problems"] = list(self.problems)
        if self.note:
            out["note"] = self.note
        return out

    @property
    def lost_something(self) -> bool:
        return self.outcome == LOST or self.cells_lost > 0 or bool(self.lost_tiles) or bool(self.lost_detail)


def _tile_dict(t) -> dict:
    d = asdict(t)
    out = {"tile": d["tile"], d["kind"]: d["bounds"] or "unknown (the fragment metadata does not say)"}
    out["cells"] = d["cells"]
    out["problem"] = d["problem"]
    return out


@dataclass
class Report:
    source: str
    dest: str
    as_of: int
    schema: str = ""
    schemas: list[str] = field(default_factory=list)
    enumerations: int = 0
    metadata: list[str] = field(default_factory=list)
    delete_conditions: list[str] = field(default_factory=list)
    lost_files: list[str] = field(default_factory=list)     # problem lines of array files left out
    fragments: list[FragmentOutcome] = field(default_factory=list)
    tiledb_version: str | None = None                        # of the library that wrote the rewrites
    labels: dict = field(default_factory=dict)                # dimension label name -> its own Report

    def count(self, outcome: str) -> int:
        return sum(1 for f in self.fragments if f.outcome == outcome)

    @property
    def totals(self) -> dict:
        """The array's own, then each dimension label's added."""
        own = self._own_totals()
        for sub in self.labels.values():
            for k, v in sub.totals.items():
                own[k] += v
        return own

    def _own_totals(self) -> dict:
        return {"fragments": len(self.fragments), "copied": self.count(COPIED),
                "rewritten": self.count(REWRITTEN), "lost": self.count(LOST),
                "cells_kept": sum(f.cells if f.outcome == COPIED else f.cells_kept for f in self.fragments),
                "cells_lost": sum(f.cells_lost for f in self.fragments),
                "tiles_lost": sum(len(f.lost_tiles) for f in self.fragments),
                "files_lost": len(self.lost_files)}

    @property
    def lost_something(self) -> bool:
        return (bool(self.lost_files) or any(f.lost_something for f in self.fragments)
                or any(sub.lost_something for sub in self.labels.values()))

    @property
    def exit_code(self) -> int:
        return 1 if self.lost_something else 0

    def to_dict(self) -> dict:
        return {"source": self.source, "dest": self.dest, "as_of": self.as_of,
                "totals": {**self.totals, "something_lost": self.lost_something},
                "written_by": f"TileDB {self.tiledb_version}" if self.tiledb_version else None,
                "schema": self.schema, "schemas": list(self.schemas), "enumerations": self.enumerations,
                "metadata": list(self.metadata), "delete_conditions": list(self.delete_conditions),
                "files_lost": list(self.lost_files),
                "fragments": [f.to_dict() for f in self.fragments],
                **({"labels": {name: sub.to_dict() for name, sub in self.labels.items()}} if self.labels else {})}

    def yaml(self) -> str:
        import yaml
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=120)

    def summary(self) -> str:
        """The totals, one line."""
        t = self.totals
        line = (f"{self.dest}: {t['fragments']} fragments: {t['copied']} copied, {t['rewritten']} rewritten, "
                f"{t['lost']} lost; {t['cells_kept']} cells kept, {t['cells_lost']} lost "
                f"({t['tiles_lost']} tiles)")
        if t["files_lost"]:
            line += f"; {t['files_lost']} array files left out"
        detail = sum(1 for r in [self, *self.labels.values()] for f in r.fragments if f.lost_detail)
        if detail:
            line += f"; {detail} fragments lost detail"
        return line + f" (see {REPORT_FILE})"
