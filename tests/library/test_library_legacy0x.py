"""tdbfs.open on TileDB 0.x arrays and a workspace, written by GenomicsDB's TileDB library
(tests/legacy0x_arrays.py): a Workspace of Arrays whose book-keeping, tiles and cells are the tree's."""

from __future__ import annotations

import pytest
import yaml

import legacy0x_arrays as Z
import library_oracle as oracle

import tdbfs

pytestmark = pytest.mark.skipif(Z.wheel_library_path() is None,
                                reason="genomicsdb==0.1.6 (its TileDB 0.x library) is not installed; "
                                       "scripts/_setup.sh installs it")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Z.load_corpus(tmp_path_factory.mktemp("zero"))


def test_a_workspace_opens_to_its_arrays(corpus):
    with tdbfs.open(corpus["ws"]) as ws:
        assert isinstance(ws, tdbfs.Workspace)
        arrays = ws.arrays
        assert sorted(arrays) == sorted(corpus["arrays"])
        checked = 0
        for name, array in arrays.items():
            assert array.legacy0x and isinstance(array, tdbfs.Array)
            alone_path, _spec = corpus["arrays"][name]
            with tdbfs.open(alone_path) as alone:
                assert alone.fragments.names() == array.fragments.names()
                for frag in alone.fragments:
                    if not frag.committed:
                        continue
                    base = f"fragments/{frag.name}"
                    assert frag.footer == yaml.safe_load(alone.open_view(f"{base}/book_keeping.yaml"))
                    assert frag.version is None and frag.t1 == frag.t2 > 0 and "0.x" in repr(frag)
                    oracle.assert_tiles_are_the_tree_files(alone, frag)
                    oracle.assert_cells_are_cells_csv(alone, frag)
                    assert array.fragments[frag.name].tile_bytes(frag.fields[0].name, 0) == \
                        frag.tile_bytes(frag.fields[0].name, 0)
                    checked += 1
        assert checked >= len(arrays)
        assert oracle.check_document(ws.check()) == oracle.cli_check_json(str(corpus["ws"]))
