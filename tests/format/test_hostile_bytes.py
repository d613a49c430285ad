"""Damaged bytes never make a format parser misbehave (tests/format/hostile.py).

Every case must return or raise FormatError with an int offset, within a time
and a traced-memory bound. The default run is a few hundred seeded cases; set
TDBFS_HOSTILE_CASES (and TDBFS_HOSTILE_SEED) for a longer one.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import hostile  # noqa: E402

CASES = int(os.environ.get("TDBFS_HOSTILE_CASES", "600"))
SEED = int(os.environ.get("TDBFS_HOSTILE_SEED", "0"))


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    return hostile.build_targets(tmp_path_factory.mktemp("hostile"))


def test_targets_cover_every_structure(targets):
    names = " ".join(t.name for t in targets)
    for needle in ("schema", "enumeration", "array metadata", "condition", ".con", ".vac",
                   "consolidated fragment metadata", "footer", "R-tree", "tile_offsets", "tile_min",
                   "tile_sums", "tile 0", "legacy fragment metadata", "zero:schema", "zero:book-keeping",
                   "zero:tile", "name "):
        assert needle in names, needle


def test_valid_targets_decode(targets):
    """The undamaged bytes decode (a harness whose targets fail on valid input tests nothing)."""
    bad = [t.name for t in targets if hostile.check(t, t.data) is not None]
    assert not bad


def test_hostile_bytes(targets):
    failures = hostile.run(targets, CASES, SEED)
    assert not failures, f"{len(failures)} of {CASES} cases failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("value", hostile.HUGE)
def test_huge_footer_fields(targets, value):
    """u64 fields of footers set to a huge value, one at a time (the reported file_sizes[0] case):
    a seeded sample of positions, every position when TDBFS_HOSTILE_CASES asks for a long run."""
    failures = hostile.sweep_u64([t for t in targets if t.name.endswith(":footer only")], value,
                                 limit=None if CASES > 5000 else 150, seed=SEED)
    assert not failures, "\n".join(failures[:40])
