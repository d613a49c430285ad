"""fragments.svg and rtree/mbrs.svg: valid SVG with one shape per fragment or MBR (counted against
tiledb-py and the rtree CSVs), read through a real mount and rendered by a real headless browser."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
import tiledb
from PIL import Image

import reference
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = shutil.which("chromium")


def shapes(data: bytes, cls: str) -> list[ET.Element]:
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg"
    return [e for e in root.iter(f"{SVG}rect") if cls in e.get("class", "").split()]


def title(e: ET.Element) -> str:
    return e.find(f"{SVG}title").text


def render(svg_path, tmp_path) -> Image.Image:
    """The SVG as Debian's chromium draws it, headless, as a PNG."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/_setup.sh installs it)")
    out = tmp_path / (os.path.basename(svg_path) + ".png")
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'chromium'}", f"--screenshot={out}", "--window-size=800,800",
                    f"file://{svg_path}"], capture_output=True, timeout=120, check=True)
    image = Image.open(out)
    image.load()
    return image


def assert_not_blank(image: Image.Image) -> None:
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 1


def test_fragments_svg_through_the_mount(sample_arrays, mount, tmp_path):
    built = sample_arrays["dense_2d"]
    mnt = mount(built.path)
    data = subprocess.run(["cat", str(mnt / "fragments.svg")], capture_output=True, check=True, timeout=60).stdout
    assert os.stat(mnt / "fragments.svg").st_size == len(data)
    rects = shapes(data, "fragment")
    info = tiledb.FragmentInfoList(str(built.path))
    assert sorted(title(r).splitlines()[0] for r in rects) == sorted(os.listdir(mnt / "fragments")) == \
        sorted(os.path.basename(u) for u in info.uri)
    # each rectangle says its domain, as TileDB gives it
    for r, uri, ned in zip(rects, info.uri, info.nonempty_domain):
        assert title(r).splitlines()[2] == ", ".join(f"{d.name} [{lo}, {hi}]"
                                                     for d, (lo, hi) in zip(built.schema().domain, ned))
    # the second fragment (a smaller write inside the first) is drawn inside the first, later colour
    big, small = rects
    assert float(small.get("width")) < float(big.get("width"))
    assert big.get("style") != small.get("style")
    assert_not_blank(render(mnt / "fragments.svg", tmp_path))


def test_consolidated_and_to_vacuum_fragments_are_marked(array_factory, tmp_path):
    built = array_factory("consolidated", sparse=False, n_fragments=3)
    data = bytes(node_bytes(built, "fragments.svg"))
    rects = shapes(data, "fragment")
    info = tiledb.FragmentInfoList(str(built.path))
    stale = {os.path.basename(u.rstrip("/")) for u in info.to_vacuum}
    assert len(rects) == len(stale) + len(info) == 4
    assert {title(r).splitlines()[0] for r in rects if "to-vacuum" in r.get("class")} == stale
    (merged,) = [r for r in rects if "consolidated" in r.get("class").split()]
    assert title(merged).splitlines()[0] == os.path.basename(info.uri[0])
    assert "stroke-width:3" in merged.get("style")
    path = tmp_path / "fragments.svg"
    path.write_bytes(data)
    assert_not_blank(render(path, tmp_path))


def node_bytes(built, path: str) -> bytes:
    node = resolve(build_root(ArrayStore(str(built.path))), path)
    data = node.read(0, node.size())
    assert len(data) == node.size()
    return data


def test_one_dimension_draws_a_strip_per_fragment(sample_arrays):
    built = sample_arrays["sparse_1d"]
    rects = shapes(node_bytes(built, "fragments.svg"), "fragment")
    assert len(rects) == len(reference.list_fragments(built.path)) == 2
    heights = {float(r.get("height")) for r in rects}
    assert heights == {300.0}  # two strips share the 600 px plot
    assert sorted(float(r.get("y")) for r in rects) == [40.0, 340.0]


def test_mbrs_svg_through_the_mount(sample_arrays, mount, tmp_path):
    built = sample_arrays["sparse_2d"]
    mnt = mount(built.path)
    for frag in reference.list_fragments(built.path):
        rtree = mnt / "fragments" / frag / "rtree"
        data = subprocess.run(["cat", str(rtree / "mbrs.svg")], capture_output=True, check=True, timeout=60).stdout
        levels = sorted(n for n in os.listdir(rtree) if n.endswith(".csv"))
        total = 0
        for n in levels:
            level = int(n[len("level_"):-len(".csv")])
            table = list(csv.DictReader(io.StringIO((rtree / n).read_text())))
            drawn = shapes(data, f"level-{level}")
            assert len(drawn) == len(table)
            for r, row in zip(drawn, table):
                assert title(r) == (f"level {level}, MBR {row['mbr']}: d0 [{row['d0_min']}, {row['d0_max']}], "
                                    f"d1 [{row['d1_min']}, {row['d1_max']}]")
            total += len(table)
        leaves = shapes(data, "leaf")
        tiles = list(csv.DictReader(io.StringIO((mnt / "fragments" / frag / "tiles.csv").read_text())))
        ref = reference.fragment_info(built.path, frag)
        assert len(leaves) == len(tiles) == len(ref.mbrs)
        assert len(shapes(data, "mbr")) == total
        # TileDB's leaf style: blue, the green part stepping by 255 / leaves
        step = max(1, 255 // len(leaves))
        assert [r.get("style") for r in leaves] == [
            f"fill:rgb(0, {i * step % 255}, 255);stroke:none;fill-opacity:0.5" for i in range(len(leaves))]
        # the first dimension runs down, the second across, each range [lo, hi] covering hi - lo + 1 units
        # over the 600 px plot from the smallest lower bound to the largest upper bound + 1, as TileDB scales
        down, across = ([m[d] for m in ref.mbrs] for d in (0, 1))
        per_down = 600 / (max(hi for _, hi in down) + 1 - min(lo for lo, _ in down))
        per_across = 600 / (max(hi for _, hi in across) + 1 - min(lo for lo, _ in across))
        for r, mbr in zip(leaves, ref.mbrs):
            assert float(r.get("height")) == pytest.approx(per_down * (mbr[0][1] - mbr[0][0] + 1), abs=1e-3)
            assert float(r.get("width")) == pytest.approx(per_across * (mbr[1][1] - mbr[1][0] + 1), abs=1e-3)
            assert float(r.get("y")) == pytest.approx(40 + per_down * (mbr[0][0] - min(lo for lo, _ in down)),
                                                      abs=1e-3)
    assert_not_blank(render(rtree / "mbrs.svg", tmp_path))


def test_no_mbrs_svg_where_the_rtree_is_empty(sample_arrays):
    built = sample_arrays["dense_2d"]
    frag = reference.list_fragments(built.path)[0]
    assert list(resolve(build_root(ArrayStore(str(built.path))), f"fragments/{frag}/rtree").children()) == []


def test_one_dimension_mbrs_are_strips_per_level(sample_arrays):
    built = sample_arrays["sparse_1d"]
    frag = reference.list_fragments(built.path)[0]
    root = build_root(ArrayStore(str(built.path)))
    data = node_bytes(built, f"fragments/{frag}/rtree/mbrs.svg")
    levels = sorted(n for n in resolve(root, f"fragments/{frag}/rtree").children() if n.endswith(".csv"))
    assert len(levels) == 2
    for level, name in enumerate(levels):
        rows = node_bytes(built, f"fragments/{frag}/rtree/{name}").decode().splitlines()[1:]
        drawn = shapes(data, f"level-{level}")
        assert len(drawn) == len(rows) and {float(r.get("y")) for r in drawn} == {40.0 + 300 * level}


def test_a_damaged_fragment_is_left_out_and_said(sample_arrays, tmp_path):
    path = tmp_path / "copy"
    shutil.copytree(sample_arrays["sparse_2d"].path, path)
    bad, good = reference.list_fragments(path)[:2]
    md = reference.fragment_path(path, bad) / "__fragment_metadata.tdb"
    md.write_bytes(md.read_bytes()[:40])
    store = ArrayStore(str(path))
    node = resolve(build_root(store), "fragments.svg")
    data = node.read(0, node.size())
    assert [title(r).splitlines()[0] for r in shapes(data, "fragment")] == [good]
    assert b"1 fragment drawn, 1 without a non-empty domain or unreadable" in data
    assert any(p.file.startswith(f"__fragments/{bad}") for p in store.findings())
