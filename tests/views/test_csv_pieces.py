"""cells/tile_K.csv and cells.csv shown in pieces (views/csv_table.py), without FUSE: every read at any
offset gives the bytes of one whole rendering, a stat renders no text, and a read renders only the
pieces it covers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import arrays  # noqa: E402
import cell_values  # noqa: E402
from tdbfs.store.open_array import open_array  # noqa: E402
from tdbfs.store.tile_columns import tile_columns  # noqa: E402
from tdbfs.views import cells_text, cells_views, csv_table  # noqa: E402
from tdbfs.views.cells_views import cells_header  # noqa: E402
from tdbfs.views.fragment_views import fragment_dir, tile_text  # noqa: E402
from tdbfs.views.nodes import resolve  # noqa: E402

PIECE = 5   # rows of a piece here, so that small arrays have many


@pytest.fixture(autouse=True)
def rendered(monkeypatch) -> list[int]:
    """Small pieces; the row count of each rendering of rows as CSV text, wherever it is called from."""
    monkeypatch.setattr(csv_table, "ROWS_PER_PIECE", PIECE)
    monkeypatch.setattr(cells_text, "ROWS_PER_BATCH", 3)
    rows, real = [], cells_text.csv_rows

    def counted(columns):
        rows.append(len(columns[0]) if columns else 0)
        return real(columns)
    for module in (cells_text, cells_views, csv_table):
        monkeypatch.setattr(module, "csv_rows", counted, raising=False)
    return rows


def per_cell_rows(columns) -> bytes:
    """The rows as the per-cell text of each column (`column_text`) joined in Python: one whole rendering,
    made another way than the pieces are."""
    texts = []
    for c in columns:
        texts += cells_text.column_text(c)
    return "".join(",".join(r) + "\n" for r in zip(*texts)).encode("utf-8")


def fragments(path):
    store = open_array(str(path))
    return [(store.fragment(rel), fragment_dir(store, rel)) for rel in store.fragment_paths()]


def check_pieces(frag, root, rng, rendered):
    tiles = [per_cell_rows(tile_columns(frag, k)) for k in range(frag.tile_count())]
    header = cells_header(frag)
    nodes = {f"cells/tile_{k}.csv": header + t for k, t in enumerate(tiles)}
    nodes["cells.csv"] = header + b"".join(tiles)
    for path, whole in nodes.items():
        assert resolve(root, path).size() == len(whole), path
    assert rendered == []   # sizes measured, no text made
    for path, whole in nodes.items():
        node = resolve(root, path)
        for _ in range(60):
            offset = int(rng.integers(0, len(whole) + 3))
            size = int(rng.choice([1, 7, 64, 300, 4096, len(whole) + 10]))
            assert bytes(node.read(offset, size)) == whole[offset:offset + size], (path, offset, size)
        assert bytes(node.read(0, len(whole) + 10)) == whole
    return nodes


def test_pieces_of_hard_cells_read_as_one_rendering(tmp_path, rendered):
    path = str(tmp_path / "special")
    cell_values.make_special(path, cells=97, capacity=40)
    [(frag, root)] = fragments(path)
    nodes = check_pieces(frag, root, np.random.default_rng(1), rendered)
    assert frag.tile_count() == 3 and nodes["cells.csv"].count(b"\n") > 98   # strings hold newlines


@pytest.mark.parametrize("orders", [("row-major", "row-major"), ("col-major", "col-major"),
                                    ("row-major", "col-major")])
def test_pieces_of_dense_tiles_read_as_one_rendering(tmp_path, orders, rendered):
    built = arrays.make_array(tmp_path, "dense", low=3, extent=4, tiles_per_dim=4, domain_high=17,
                              fragments=[[(4, 9), (5, 16)]], tile_order=orders[0], cell_order=orders[1])
    [(frag, root)] = fragments(built.path)
    nodes = check_pieces(frag, root, np.random.default_rng(2), rendered)
    assert nodes["cells.csv"].count(b"\n") == 1 + 6 * 12


def test_a_stat_renders_nothing_and_a_read_only_its_pieces(tmp_path, rendered):
    path = str(tmp_path / "special")
    cell_values.make_special(path, cells=200, capacity=200)
    [(frag, root)] = fragments(path)
    node = resolve(root, "cells/tile_0.csv")
    size = node.size()
    assert size > 10_000 and resolve(root, "cells.csv").size() == size
    assert rendered == []
    data = bytes(node.read(size // 2, 100))
    assert len(data) == 100 and 0 < sum(rendered) <= 2 * PIECE


@pytest.mark.parametrize("kind", ["special", "all_dtypes", "dense"])
def test_pieces_of_tile_text_read_as_the_whole(tmp_path, array_factory, kind):
    if kind == "special":
        path = str(tmp_path / "special")
        cell_values.make_special(path, cells=61, capacity=30)
    elif kind == "all_dtypes":
        path = array_factory("all_dtypes", cells=23, capacity=12).path
    else:
        path = arrays.make_array(tmp_path, "dense", low=3, extent=4, tiles_per_dim=2, domain_high=10,
                                 fragments=[[(4, 9), (5, 10)]]).path
    rng = np.random.default_rng(4)
    seen = 0
    for frag, root in fragments(path):
        for field in frag.stored_fields():
            folder = "dims" if field.kind == "dimension" else "attrs"
            try:
                tiles = resolve(root, f"{folder}/{field.stem}").children()
            except KeyError:
                continue
            for k in range(frag.tile_count()):
                node = tiles.get(f"tile_{k}.txt")
                if node is None:
                    continue
                whole = tile_text(frag, field, k)
                assert node.size() == len(whole), (field.name, k)
                for _ in range(20):
                    offset, size = int(rng.integers(0, len(whole) + 2)), int(rng.choice([1, 9, 100, 10_000]))
                    assert bytes(node.read(offset, size)) == whole[offset:offset + size], (field.name, k, offset)
                seen += 1
    assert seen >= 6
