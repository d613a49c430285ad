"""`stats.csv` at the top and in each fragment folder: tiles, cells, stored and decoded bytes per field,
from the metadata alone (store/stats.py), so reading it decodes no tile.

Columns (docs/tour.md, "Sizes, hints and pictures"): row (`field`, `field_total`, `array_total`), fragment, field,
stem, kind, tile_count, cell_count, stored_bytes, decoded_bytes, ratio (decoded / stored, 3 decimals),
filters, error (why a fragment has no rows of its own).
"""

from __future__ import annotations

from ..store.digest_pool import digests_ahead
from ..store.fragment_digest import fragment_digest
from ..store.stats import FieldStats, fragment_stats
from .array_views import summary_file
from .nodes import BytesFile, InCache
from .common import guarded
from .render import to_csv

HEADER = ["row", "fragment", "field", "stem", "kind", "tile_count", "cell_count", "stored_bytes", "decoded_bytes",
          "ratio", "filters", "error"]


def array_stats_file(store) -> BytesFile:
    """The top `stats.csv`: rendered again when fragments come and go (array_views.summary_file); each
    fragment's numbers are kept in the store's cache."""
    return summary_file(store, lambda: array_stats_csv(store), "field statistics")


def fragment_stats_file(frag, key, fixed: bool) -> BytesFile:
    return BytesFile(guarded(lambda: fragment_stats_csv(frag), frag.problems, frag.rel, "field statistics"),
                     InCache(frag.store.cache, ("stats.csv", key), immutable=fixed), mtime=frag.mtime())


def fragment_stats_csv(frag) -> bytes:
    stats = fragment_stats(frag)
    return to_csv(HEADER, [_row("field", frag.name, s) for s in stats] + _totals(stats, _cells(stats)))


def array_stats_csv(store) -> bytes:
    rows, every, cells = [], [], 0
    rels = sorted(store.fragment_paths(), key=lambda r: r.rsplit("/", 1)[-1])
    digests_ahead(store, rels)
    for rel in rels:
        name = rel.rsplit("/", 1)[-1]
        d = fragment_digest(store, rel)   # recorded by the fragment's parse when it failed; the others still show
        if d.stats_error is not None:
            rows.append(["field", name] + [None] * 9 + [d.stats_error])
            continue
        stats = d.stats
        rows += [_row("field", name, s) for s in stats]
        every += stats
        cells += _cells(stats)
    return to_csv(HEADER, rows + _totals(every, cells))


def _cells(stats) -> int:
    """A fragment's cells: each of its fields holds them all."""
    return stats[0].cell_count if stats else 0


def _totals(stats, cells: int) -> list[list]:
    """One `field_total` row per field name (in first-seen order), then the `array_total` row."""
    by_field: dict[str, list[FieldStats]] = {}
    for s in stats:
        by_field.setdefault(s.field, []).append(s)
    rows = []
    for name, group in by_field.items():
        filters = {s.filters for s in group}
        rows.append(_sum_row("field_total", name, group[0].stem if len({s.stem for s in group}) == 1 else None,
                             group[0].kind, group, sum(s.cell_count for s in group),
                             filters.pop() if len(filters) == 1 else "(differ)"))
    rows.append(_sum_row("array_total", None, None, None, stats, cells, None))
    return rows


def _row(kind: str, fragment: str, s: FieldStats) -> list:
    return [kind, fragment, s.field, s.stem, s.kind, s.tile_count, s.cell_count, s.stored_bytes, s.decoded_bytes,
            _ratio(s.decoded_bytes, s.stored_bytes), s.filters, None]


def _sum_row(kind, field, stem, field_kind, group, cells, filters) -> list:
    stored = sum(s.stored_bytes for s in group)
    decoded = sum(s.decoded_bytes for s in group)
    return [kind, None, field, stem, field_kind, sum(s.tile_count for s in group), cells, stored, decoded,
            _ratio(decoded, stored), filters, None]


def _ratio(decoded: int, stored: int) -> str | None:
    return f"{decoded / stored:.3f}" if stored else None


def root_pictures_and_stats(store) -> dict:
    """The top-level summaries of this module and pictures.py, made once per tree."""
    from .pictures import fragments_svg_file
    return {"stats.csv": array_stats_file(store), "fragments.svg": fragments_svg_file(store)}
