"""Consolidated fragment metadata: the entries of a `__fragment_meta/*.meta` file with their footers."""

from __future__ import annotations

from ...format.consolidated_fragment_metadata import DecodedFooter
from ...problem import Problem
from .fragment_metadata import describe_footer


def _describe_problem(p: Problem) -> dict:
    """Where and what, without a severity: a footer that does not decode is shown, not judged, here."""
    out = {"file": p.file, "structure": p.structure, "offset": p.offset, "message": p.message}
    if p.within:
        out["within"] = p.within
    return out


def describe_consolidated_fragment_metadata(decoded: tuple[DecodedFooter, ...]) -> dict:
    """Every entry with its footer, or the problem that kept the footer from decoding."""
    out_entries = []
    for d in decoded:
        e = d.entry
        item: dict = {"name": e.name, "footer_offset": e.footer_offset, "footer_length": e.footer_length}
        if e.fragment_name != e.name:
            item["fragment"] = e.fragment_name
        if d.footer is None:
            item["problem"] = _describe_problem(d.problem)
        else:
            item["footer"] = describe_footer(d.footer)
            if d.footer.notes:
                item["notes"] = list(d.footer.notes)
        out_entries.append(item)
    return {"fragment_count": len(decoded), "fragments": out_entries}
