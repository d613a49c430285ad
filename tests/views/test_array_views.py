"""Array-level views (array.yaml, schema/, metadata/, commits/, fragment_meta/, labels/) against TileDB."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tiledb
import yaml

import reference
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import SymlinkNode, resolve
from tdbfs.views.tree import build_root


def view(built):
    return build_root(ArrayStore(str(built.path)))


def load(root, path):
    node = resolve(root, path)
    data = node.read(0, node.size())
    assert len(data) == node.size()
    return yaml.safe_load(data)


def test_array_yaml_counts(sample_arrays):
    built = sample_arrays["consolidated_sparse"]
    summary = load(view(built), "array.yaml")
    ref = reference.array_summary(built.path)
    assert summary["array_type"] == "sparse"
    assert summary["counts"]["fragments"] == len(ref["fragments"])
    assert summary["counts"]["schemas"] == len(ref["schemas"])
    assert summary["counts"]["commit_files"] == len(ref["commit_files"])
    assert summary["sizes"]["total_bytes"] == ref["total_size"]
    assert summary["format_versions"]["fragments"] == [22]
    # consolidated but not vacuumed: a hint, no problem
    assert summary["problems"] == []
    (hint,) = [h for h in summary["hints"] if h["hint"] == "not_vacuumed"]
    assert hint["fragments"] == len(ref["fragments"]) - 1


def test_schema_views_match_tiledb(sample_arrays):
    built = sample_arrays["all_dtypes_sparse"]
    root = view(built)
    link = resolve(root, "schema/current.yaml")
    assert isinstance(link, SymlinkNode)
    doc = load(root, f"schema/{link.target}")
    ts = tiledb.ArraySchema.load(str(built.path))
    assert doc["array_type"] == "sparse"
    assert doc["capacity"] == ts.capacity
    assert doc["allows_dups"] == ts.allows_duplicates
    assert [d["name"] for d in doc["domain"]["dimensions"]] == [d.name for d in ts.domain]
    assert [a["name"] for a in doc["attributes"]] == [ts.attr(i).name for i in range(ts.nattr)]
    for a, i in zip(doc["attributes"], range(ts.nattr)):
        assert a["nullable"] == ts.attr(i).isnullable
        assert (a["cell_val_num"] == "var") == ts.attr(i).isvar
    for d, td in zip(doc["domain"]["dimensions"], ts.domain):
        if d["domain"] is not None and np.issubdtype(td.dtype, np.integer):
            assert d["domain"] == [int(x) for x in td.domain]


def test_schema_evolution_shows_every_schema_and_latest(sample_arrays):
    built = sample_arrays["schema_evolution"]
    root = view(built)
    names = reference.schema_names(built.path)
    listing = resolve(root, "schema").children()
    assert len(names) == 3
    for n in names:
        assert f"{n}.yaml" in listing
    latest = resolve(root, "schema/current.yaml").target
    assert latest == f"{max(names)}.yaml"
    latest_attrs = [a["name"] for a in load(root, f"schema/{latest}")["attributes"]]
    ts = tiledb.ArraySchema.load(str(built.path))
    assert latest_attrs == [ts.attr(i).name for i in range(ts.nattr)]


def test_enumeration_views_match_tiledb(sample_arrays):
    built = sample_arrays["enumerations"]
    root = view(built)
    files = sorted(n for n in resolve(root, "schema/enumerations").children() if n.endswith(".yaml"))
    assert files
    by_name = {}
    for f in files:
        doc = load(root, f"schema/enumerations/{f}")
        by_name.setdefault(doc["name"], []).append(doc["values"])
    with tiledb.open(str(built.path)) as A:
        colors = list(A.enum("colors").values())
        sizes = [int(x) for x in A.enum("sizes").values()]
    assert colors in by_name["colors"]  # the extended version is one of the files
    assert ["red", "green", "blue"] in by_name["colors"]
    assert sizes in by_name["sizes"]


def test_merged_metadata_matches_tiledb(sample_arrays):
    built = sample_arrays["metadata"]
    root = view(built)
    merged = load(root, "metadata/merged.yaml")["metadata"]
    expected = reference.read_metadata(built.path)
    assert "int" not in merged and "int" not in expected  # deleted by the last write
    for key in ("float", "str"):
        assert merged[key]["value"] == expected[key]
    assert merged["str"]["value"] == "hello again"
    per_file = [f for f in resolve(root, "metadata").children() if f != "merged.yaml" and f.endswith(".yaml")]
    assert len(per_file) == len(os.listdir(built.path / "__meta"))


def test_delete_commit_view(sample_arrays):
    built = sample_arrays["deletes"]
    root = view(built)
    dels = [f for f in resolve(root, "commits").children() if f.endswith(".del.yaml")]
    ops = built.ops_of("delete")
    assert dels and len(dels) == len([f for f in os.listdir(built.path / "__commits") if f.endswith(".del")])
    docs = [load(root, f"commits/{f}") for f in sorted(dels)]
    for doc in docs:
        assert doc["kind"] == "delete condition"
        assert doc["deletes_cells_where"]
    # The conditions name the fields the test deleted on.
    for doc, op in zip(docs, sorted(ops, key=lambda o: o.timestamp)):
        assert any(word in doc["deletes_cells_where"] for word in op.cond.split() if word.isidentifier())


def test_vacuum_and_write_commit_views(sample_arrays):
    built = sample_arrays["consolidated_sparse"]
    root = view(built)
    commits = resolve(root, "commits").children()
    vac = [f for f in commits if f.endswith(".vac.yaml")]
    assert len(vac) == 1
    vacuumed = load(root, f"commits/{vac[0]}")["vacuumed"]
    for name in reference.list_fragments(built.path):
        info = reference.fragment_info(built.path, name)
        assert (f"__fragments/{name}" in vacuumed) == info.to_vacuum
        frag = load(root, f"fragments/{name}/fragment.yaml")
        assert frag["to_vacuum"] == info.to_vacuum
        assert frag["committed"] is True
    wrt = [f for f in commits if f.endswith(".wrt.yaml")]
    doc = load(root, f"commits/{wrt[0]}")
    assert doc["kind"] == "write commit" and doc["fragment_exists"] is True


def test_fragment_meta_view_matches_own_footers(sample_arrays):
    built = sample_arrays["fragment_meta"]
    root = view(built)
    files = [f for f in resolve(root, "fragment_meta").children() if f.endswith(".yaml")]
    assert len(files) == 1
    doc = load(root, f"fragment_meta/{files[0]}")
    assert doc["fragment_count"] == len(doc["fragments"]) >= 2
    for entry in doc["fragments"]:
        own = load(root, f"fragments/{entry['name']}/footer.yaml")
        footer = dict(entry["footer"])
        for key in ("version", "dense", "non_empty_domain", "sparse_tile_num", "file_sizes"):
            assert footer[key] == own[key]


def test_labels_are_shown_as_arrays(sample_arrays):
    built = sample_arrays["dim_labels"]
    root = view(built)
    (label,) = resolve(root, "labels").children()
    frags = list(resolve(root, f"labels/{label}/fragments").children())
    assert len(frags) == 1
    folder = resolve(root, f"labels/{label}/fragments/{frags[0]}/attrs/a0")
    texts = sorted((n for n in folder.children() if n.endswith(".txt")), key=lambda n: int(n[5:-4]))
    assert texts == ["tile_0.txt", "tile_1.txt"]  # extent 4 over [0, 7]
    values = []
    for name in texts:
        node = folder.children()[name]
        values += [float(x) for x in node.read(0, node.size()).decode().split()]
    assert values == pytest.approx(list(np.linspace(-1.0, 1.0, 8)))


def test_a_tile_read_in_small_pieces_is_decoded_once(sample_arrays, monkeypatch):
    import tdbfs.store.fragment as fragment_module
    calls = []
    real = fragment_module.unfilter_tile
    monkeypatch.setattr(fragment_module, "unfilter_tile", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    built = sample_arrays["sparse_2d"]
    root = build_root(ArrayStore(str(built.path)))
    name = reference.list_fragments(built.path)[0]
    node = resolve(root, f"fragments/{name}/attrs/a0/tile_0.bin")
    size = node.size()
    pieces = b"".join(node.read(off, 3) for off in range(0, size, 3))
    assert pieces == node.read(0, size) and len(pieces) == size > 3
    txt = resolve(root, f"fragments/{name}/attrs/a0/tile_0.txt")
    assert len(txt.read(0, txt.size())) == txt.size()
    assert len(calls) == 1, f"tile decoded {len(calls)} times for {size // 3 + 2} reads and a text view"


def test_nothing_is_parsed_by_listing_the_top_and_fragments(sample_arrays, monkeypatch):
    built = sample_arrays["sparse_2d"]
    store = ArrayStore(str(built.path))
    opened = []
    real = store.read_file
    monkeypatch.setattr(store, "read_file", lambda rel: opened.append(rel) or real(rel))
    root = build_root(store)
    assert "fragments" in root.children()
    names = list(resolve(root, "fragments").children())
    for n in names:
        assert set(resolve(root, f"fragments/{n}").children()) >= {"fragment.yaml", "footer.yaml", "attrs"}
    assert opened == []
