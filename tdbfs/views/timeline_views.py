"""`timeline.csv`: one row per event the array's files record, in time order (store/timeline.py)."""

from __future__ import annotations

from ..format.names import iso8601_ms
from .array_views import summary_file
from .nodes import BytesFile
from .render import to_csv

COLUMNS = ["time_ms", "time_utc", "event", "subject", "file", "t1", "t2", "into", "detail"]


def timeline_file(store) -> BytesFile:
    # a fragment written, consolidated or vacuumed while mounted adds rows, and stat must say so
    return summary_file(store, lambda: timeline_csv(store), "timeline")


def timeline_csv(store) -> bytes:
    from ..store.timeline import timeline
    types = None
    rows = []
    for e in timeline(store):
        detail = e.detail
        if e.condition is not None:
            if types is None:
                types = _field_types(store)
            detail = "; ".join(p for p in (_condition_text(e.condition, types), detail) if p)
        rows.append([e.time_ms, iso8601_ms(e.time_ms) if e.time_ms is not None else None, e.event, e.subject,
                     e.file, e.t1, e.t2, e.into, detail])
    return to_csv(COLUMNS, rows)


def _field_types(store) -> dict:
    from .array_views import _field_types
    return _field_types(store) if not store.legacy0x_layout else {}


def _condition_text(condition, types) -> str:
    """What a delete or update does, in the user's terms, as commits/<file>.yaml says it."""
    from .describe.commits import describe_condition_commit
    described = describe_condition_commit(condition, types)
    if condition.is_update:
        values = ", ".join(f"{v['field']} = {v.get('value', '0x' + v['value_hex'])}"
                           for v in described["update_values"])
        return f"updates cells where {described['updates_cells_where']}: set {values}"
    return f"deletes cells where {described['deletes_cells_where']}"
