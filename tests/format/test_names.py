"""Timestamped names (§6.1) against names TileDB writes and the back-compat corpus."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import tiledb

from tdbfs.format.errors import FormatError
from tdbfs.views.describe.names import describe_fragment_name
from tdbfs.format.names import (
    iso8601_ms,
    parse_fragment_name,
    parse_timestamped_name,
    try_parse_name,
)

from corpus import BACKCOMPAT


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A sparse array with three writes (one at a fixed timestamp), metadata and a delete."""
    uri = str(tmp_path_factory.mktemp("names") / "a")
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 99), tile=10, dtype=np.int32))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("a", dtype=np.int32)]))
    for i in range(2):
        with tiledb.open(uri, "w") as A:
            A[np.array([i], dtype=np.int32)] = np.array([i], dtype=np.int32)
            A.meta[f"k{i}"] = i
        time.sleep(0.002)
    with tiledb.open(uri, "w", timestamp=1_700_000_000_123) as A:
        A[np.array([5], dtype=np.int32)] = np.array([5], dtype=np.int32)
    with tiledb.open(uri, "d") as A:
        A.query(cond="a < 1").submit()
    return uri


def test_fragment_names_match_tiledb(written):
    info = tiledb.array_fragments(written)
    assert len(info) == 3
    for f in info:
        folder = f.uri.rstrip("/").rsplit("/", 1)[-1]
        n = parse_fragment_name(folder)
        assert (n.t1, n.t2) == f.timestamp_range
        assert n.format_version == f.version == 22
        assert n.name_version == 3 and n.extension == "" and n.stem == folder
        assert len(n.uuid) == 32 and folder.endswith(f"_{n.uuid}_22")
        # the commit marker parses to the same fragment
        marker = parse_timestamped_name(folder + ".wrt")
        assert marker.extension == ".wrt" and marker.stem == folder and marker.timestamp_range == n.timestamp_range
        assert os.path.exists(os.path.join(written, "__commits", folder + ".wrt"))
    fixed = [parse_fragment_name(f.uri.rsplit("/", 1)[-1]) for f in info if f.timestamp_range[0] == 1_700_000_000_123]
    assert len(fixed) == 1
    assert fixed[0].t1_iso == fixed[0].t2_iso == "2023-11-14T22:13:20.123Z"


def test_schema_meta_and_commit_names(written):
    schema_name = tiledb.array_fragments(written)[0].array_schema_name
    s = parse_timestamped_name(schema_name)
    assert s.format_version is None and s.name_version == 2 and s.t1 == s.t2
    assert os.listdir(os.path.join(written, "__schema")).count(schema_name) == 1
    metas = [parse_timestamped_name(n) for n in os.listdir(os.path.join(written, "__meta"))]
    assert len(metas) == 2 and all(m.format_version is None and m.extension == "" for m in metas)
    # metadata is written at the write's timestamp, after the schema
    assert all(m.t1 >= s.t1 for m in metas)
    dels = [n for n in os.listdir(os.path.join(written, "__commits")) if n.endswith(".del")]
    assert len(dels) == 1
    d = parse_timestamped_name(dels[0])
    assert d.extension == ".del" and d.format_version == 22 and d.name_version == 3


@pytest.mark.backcompat
def test_legacy_names():
    v1 = parse_fragment_name("__5dc2cc9cce204a189f825fd4919d0c55_1541540586869")
    assert os.path.isdir(f"{BACKCOMPAT}/v01/non_split_coords_v1_4_0/{v1.name}")
    assert v1.name_version == 1 and v1.t1 == v1.t2 == 1541540586869 and v1.format_version is None
    assert v1.uuid == "5dc2cc9cce204a189f825fd4919d0c55" and v1.assumed_format_version == 2
    assert v1.t1_iso == "2018-11-06T21:43:06.869Z"
    v3 = parse_fragment_name("__1572977888662_1572977888662_196d42e3ea9343848381e544373cb50a/")
    assert v3.name_version == 2 and v3.format_version is None and v3.assumed_format_version == 4
    assert v3.name == "__1572977888662_1572977888662_196d42e3ea9343848381e544373cb50a"
    ok = parse_fragment_name(f"{BACKCOMPAT}/v05/vcf_ingested_2samples_data/"
                             "__1600784583863_1600784583863_81f44dcbddf947f3986ece2c22649d76_5.ok")
    assert ok.extension == ".ok" and ok.format_version == 5 and ok.name_version == 3
    exp = parse_fragment_name("__1657562300109_1657562300109_8dc3a927a28e445080d5dfd288825e1d_4294967295")
    assert exp.format_version == 0xFFFFFFFF
    con = parse_timestamped_name("__1795292438468_1795292438493_000000037c373901b07de54ae08c8108_22.con")
    assert (con.t1, con.t2) == (1795292438468, 1795292438493) and con.extension == ".con"
    for ext in (".vac", ".ign", ".meta", ".tmp", ".upd"):
        assert parse_timestamped_name(f"__1_2_{'a' * 32}_22{ext}").extension == ext


KNOWN_DIRS = {"__schema", "__meta", "__commits", "__fragment_meta", "__fragments", "__labels", "__enumerations",
              "__group"}


@pytest.mark.backcompat
def test_every_name_in_the_corpus_parses():
    """Every `__...` entry of the corpus that is not a fixed name is a timestamped name."""
    seen = 0
    for root, dirs, files in os.walk(BACKCOMPAT):
        if "pre_format" in root:
            continue
        for n in dirs + files:
            if not n.startswith("__") or n in KNOWN_DIRS or n.endswith(".tdb"):
                continue
            parsed = try_parse_name(n)
            assert parsed is not None, os.path.join(root, n)
            assert parsed.t1 <= parsed.t2
            seen += 1
    assert seen > 50


@pytest.mark.parametrize("bad,pos,words", [
    ("fragment", 0, "starts with '__'"),
    ("__1_2", 2, "32 hexadecimal"),                          # two parts: uuid then ms
    (f"__12a_5_{'a' * 32}_22", 2, "not a decimal"),
    (f"__5_4_{'a' * 32}_22", 2, "after end"),               # t1 > t2
    (f"__1_2_{'g' * 32}_22", 6, "32 hexadecimal"),
    (f"__1_2_{'a' * 31}", 6, "32 hexadecimal"),
    (f"__1_2_{'a' * 32}_x", 39, "not a decimal"),
    (f"__1_2_{'a' * 32}_22_7", 0, "parts"),
    (f"__{2 ** 64}_{2 ** 64}_{'a' * 32}_22", 2, "64 bits"),
    ("__array_schema.tdb", 2, "32 hexadecimal"),
])
def test_bad_names(bad, pos, words):
    with pytest.raises(FormatError) as e:
        parse_fragment_name(bad)
    assert e.value.offset == pos, str(e.value)
    assert words in e.value.message
    assert e.value.file == bad
    assert try_parse_name(bad) is None


def test_iso_and_dict():
    assert iso8601_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso8601_ms(2 ** 64 - 1) is None
    n = parse_timestamped_name(f"__{2 ** 64 - 1}_{2 ** 64 - 1}_{'b' * 32}.vac")
    assert n.t1_iso is None
    d = describe_fragment_name(parse_fragment_name(f"__1000_2001_{'c' * 32}_21"))
    assert d == {"name": f"__1000_2001_{'c' * 32}_21", "t1": 1000, "t2": 2001,
                 "t1_iso": "1970-01-01T00:00:01.000Z", "t2_iso": "1970-01-01T00:00:02.001Z",
                 "uuid": "c" * 32, "format_version": 21, "name_version": 3}
