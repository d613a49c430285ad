"""A fragment vacuumed while mounted is gone from every path under it (issue 35, item 6): `fragments/`
stops listing it, and a cat, stat or ls of anything under it answers ENOENT at once, while the fragment
consolidation wrote is served. Real arrays from tiledb-py, a real FUSE mount."""

from __future__ import annotations

import errno
import os
import time

import yaml

import arrays
from damage import mount_tracked, read_view


def _errno_of(fn, *args) -> int | None:
    try:
        fn(*args)
    except OSError as exc:
        return exc.errno
    return None


def test_vacuumed_fragment_paths_answer_enoent(tmp_path):
    built = arrays.build_consolidated(tmp_path / "arr", n_fragments=3)
    old = built.fragments()
    with mount_tracked(built.path) as mnt:
        frags = mnt / "fragments"
        # read some views of every fragment first: the daemon and the kernel now know their nodes
        kept = {}
        for name in old:
            for view in ("fragment.yaml", "tiles.csv", "attrs/a0/tile_0.bin"):
                data, err, _, _ = read_view(frags / name / view)
                assert err is None and data, f"{name}/{view}: {err}"
                kept[(name, view)] = data
            assert os.listdir(frags / name / "attrs" / "a0")
        arrays.vacuum(built)
        live = built.fragments()
        gone = [n for n in old if n not in live]
        assert gone and len(live) == 1, (old, live)
        assert sorted(os.listdir(frags)) == live
        for name in gone:
            for view in ("fragment.yaml", "tiles.csv", "attrs/a0/tile_0.bin", "footer.yaml"):
                path = frags / name / view
                data, err, _, _ = read_view(path)
                assert err == errno.ENOENT, f"{name}/{view} still served after vacuum ({len(data or b'')} bytes)"
            # fragment.yaml can change: every stat asks the daemon (attr_timeout 0)
            assert _errno_of(os.stat, frags / name / "fragment.yaml") == errno.ENOENT, f"stat {name}/fragment.yaml"
            assert _errno_of(os.listdir, frags / name / "attrs" / "a0") == errno.ENOENT, f"ls {name}/attrs/a0"
            assert _errno_of(os.listdir, frags / name) == errno.ENOENT, f"ls {name}"
        # the kernel keeps the attributes of an immutable file (a tile) until the fragment's name is looked
        # up again, after entry_timeout (1 s): then they are gone too
        time.sleep(1.2)
        for name in gone:
            for view in ("tiles.csv", "attrs/a0/tile_0.bin"):
                assert _errno_of(os.stat, frags / name / view) == errno.ENOENT, f"stat {name}/{view}"
        # the consolidated fragment is served, fresh paths under it work
        new = live[0]
        doc = yaml.safe_load((frags / new / "fragment.yaml").read_bytes())
        assert doc["problems"] == [] and doc["cell_count"] == 3 * 5
        data, err, st, _ = read_view(frags / new / "attrs" / "a0" / "tile_0.bin")
        assert err is None and len(data) == st > 0
