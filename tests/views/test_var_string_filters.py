"""Var-sized strings whose offsets TileDB embeds in RLE / DICTIONARY var tiles (docs/format.md §3.4).

Arrays written by tiledb-py (ASCII and UTF-8 attributes, RLE or DICTIONARY alone or followed by
compressors and a checksum, nullable ones, ASCII string dimensions with RLE and DICTIONARY
filters of their own; long runs, long strings, empty strings, a tile of only empty strings,
several tiles): every tile_K.bin (the rebuilt offsets) and tile_K.var.bin equals TileDB's read
of the fragment. Also the back-compat v22 VCF array, read in place.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml

import corpus
import reference
from arrays import VAR_STRING_ATTRS, var_string_values
from test_tiles_match_tiledb import _check_fragment, _read
from tdbfs.store import ArrayStore
from tdbfs.store import fragment as fragment_module
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root


@pytest.fixture(scope="module")
def var_arrays(tmp_path_factory):
    import arrays
    base = tmp_path_factory.mktemp("var_strings")
    return {"sparse": arrays.make_array(base, "var_strings", name="sparse"),
            "dense": arrays.make_array(base, "var_strings", name="dense", sparse=False, cells=900)}


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_every_tile_matches_tiledb(var_arrays, kind):
    built = var_arrays[kind]
    root = build_root(ArrayStore(str(built.path)))
    (name,) = reference.list_fragments(built.path)
    _check_fragment(root, built, name)  # offsets and var bytes of every tile, problems == []


def test_offsets_are_rebuilt_and_the_offsets_file_is_empty(var_arrays):
    built = var_arrays["sparse"]
    store = ArrayStore(str(built.path))
    frag = store.fragments()[0]
    stems = {f.name: f for f in frag.stored_fields()}
    for name in list(VAR_STRING_ATTRS) + ["d0", "d1"]:
        field = stems[name]
        assert frag.offsets_embedded(field), name
        for k in range(frag.tile_count()):
            loc = frag.location(field, k, "data")
            assert loc.persisted_size == 8 and store.pread(loc.file, loc.offset, 8) == bytes(8)  # nchunks = 0
            cells = frag.tile_cell_num(k)
            assert loc.unfiltered_size == 8 * cells  # known without decoding
            offsets = np.frombuffer(frag.tile(field, k, "data").data, "<u8")
            var = frag.tile(field, k, "var").data
            assert len(offsets) == cells and offsets[0] == 0 and np.all(np.diff(offsets) >= 0)
            assert int(offsets[-1]) <= len(var)


def test_the_values_are_the_ones_written(var_arrays):
    built = var_arrays["sparse"]
    store = ArrayStore(str(built.path))
    frag = store.fragments()[0]
    for k_attr, name in enumerate(VAR_STRING_ATTRS):
        field = frag.field_by_stem(f"a{k_attr}")
        assert field.name == name
        got = []
        for k in range(frag.tile_count()):
            offsets = np.frombuffer(frag.tile(field, k, "data").data, "<u8").tolist()
            var = frag.tile(field, k, "var").data
            got += [var[s:e] for s, e in zip(offsets, offsets[1:] + [len(var)])]
        want = var_string_values(700, 300, seed=k_attr)
        if VAR_STRING_ATTRS[name][0] == "ascii":
            want = [w.encode("utf-8").decode("ascii", "replace").replace("\ufffd", "?") for w in want]
        assert got == [w.encode() for w in want]
        assert all(v == b"" for v in got[300:600]), "tile 1 is all empty strings"


def test_tile_yaml_records_the_string_encodings(var_arrays):
    built = var_arrays["sparse"]
    root = build_root(ArrayStore(str(built.path)))
    (name,) = reference.list_fragments(built.path)
    base = f"fragments/{name}/attrs"
    rle = yaml.safe_load(_read(root, f"{base}/a0/tile_0.yaml"))["streams"]
    stage = rle["var"]["chunks"][0]["stages"][0]
    assert stage["filter"] == "RLE" and stage["string_encoding"] == "RLE"
    # 270 equal strings then mixed ones: one run longer than 255 and a 300-byte string
    assert stage["run_len_width"] == 2 and stage["str_len_width"] == 2
    assert stage["cells"] == 300 and stage["offsets_bytes"] == 2400 and stage["runs"] == 31
    assert stage["unfiltered_bytes"] == rle["var"]["unfiltered_size"]
    assert rle["var"]["chunks"][0]["stages"][1]["filter"] == "ZSTD"
    assert rle["offsets"]["unfiltered_size"] == 2400 and rle["offsets"]["chunks"] == []
    dct = yaml.safe_load(_read(root, f"{base}/a2/tile_0.yaml"))["streams"]["var"]["chunks"][0]["stages"]
    assert [s["filter"] for s in dct] == ["DICTIONARY", "LZ4", "CHECKSUM_SHA256"]
    d = dct[0]
    assert d["id_width"] == 2 and d["str_len_width"] == 2 and d["dictionary_entries"] == 7
    assert d["dictionary_first"][0] == "same" and "L" * 300 in d["dictionary_first"]
    assert dct[2]["checksums"][0]["ok"] is True
    empty = yaml.safe_load(_read(root, f"{base}/a2/tile_1.yaml"))["streams"]["var"]["chunks"][0]["stages"][0]
    assert empty["dictionary_entries"] == 1 and empty["dictionary_first"] == [""] and empty["unfiltered_bytes"] == 0


def test_offsets_come_from_the_same_var_decode(var_arrays, monkeypatch):
    built = var_arrays["sparse"]
    frag = ArrayStore(str(built.path)).fragments()[0]
    field = frag.field_by_stem("a3")
    calls = []
    real = fragment_module.unfilter_tile
    monkeypatch.setattr(fragment_module, "unfilter_tile", lambda *a, **kw: calls.append(a[1]) or real(*a, **kw))
    offsets = frag.tile(field, 2, "data")
    var = frag.tile(field, 2, "var")
    frag.tile(field, 2, "data")
    assert [c.rsplit("/", 1)[-1] for c in calls] == ["a3_var.tdb"]  # one decode, of the var tile only
    assert offsets.data == var.offsets


def test_tile_text_shows_the_strings(var_arrays):
    built = var_arrays["dense"]
    root = build_root(ArrayStore(str(built.path)))
    (name,) = reference.list_fragments(built.path)
    text = _read(root, f"fragments/{name}/attrs/a0/tile_0.txt").decode().splitlines()
    assert len(text) == 300 and text[0] == '"same"' and text[271] == '"' + "L" * 300 + '"'



@pytest.mark.backcompat
def test_backcompat_v22_vcf_var_string_rle_and_dictionary(tmp_path):
    src = corpus.BACKCOMPAT + "/v22/vcf_new_format_data"  # read in place, never written
    store = ArrayStore(src)
    root = build_root(store)
    (name,) = reference.list_fragments(src)
    frag = store.fragments()[0]
    embedded = [f.name for f in frag.stored_fields() if frag.offsets_embedded(f)]
    assert embedded == ["contig", "sample"]  # d0 RLE, d2 DICTIONARY+ZSTD
    copy = tmp_path / "vcf"
    shutil.copytree(src, copy)  # TileDB only ever opens the copy

    class Built:
        path = copy
    _check_fragment(root, Built, name)
    problems = yaml.safe_load(_read(root, f"fragments/{name}/fragment.yaml"))["problems"]
    assert not any("unsupported" in p["message"].lower() for p in problems)
    sample = frag.field_by_stem("d2")
    assert frag.tile(sample, 0, "var").chunks[0].stages[0]["dictionary_first"] == ["HG00280"]
    assert resolve(root, f"fragments/{name}/dims/d0/tile_0.bin").size() == 8 * frag.tile_cell_num(0)
