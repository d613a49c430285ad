"""Where the back-compat corpus of real TileDB arrays is.

The corpus ships with the repository, in tests/data/backcompat_arrays (its INDEX.md describes
every array; tests/data/SOURCES.md says where each came from and under which licence).
$TDBFS_BACKCOMPAT_ARRAYS, when set and not empty, points the tests at another copy instead.

Tests that read the corpus carry the `backcompat` marker (registered in pyproject.toml):
conftest.py skips them, with SKIP_REASON, only where the corpus folder is missing, which in a
clone of the repository does not happen. Helpers that read the corpus call `require()` too.

Tests only read the corpus in place (or copy arrays to a temporary folder); never write there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parent.parent
#: The copy of the corpus that is part of the repository.
IN_REPO = str(_REPO / "tests" / "data" / "backcompat_arrays")
BACKCOMPAT = os.environ.get("TDBFS_BACKCOMPAT_ARRAYS") or IN_REPO
AVAILABLE = os.path.isdir(BACKCOMPAT)
if BACKCOMPAT == IN_REPO:
    SKIP_REASON = (f"back-compat corpus missing from the checkout: {BACKCOMPAT} "
                   "(it is part of the repository; restore tests/data/backcompat_arrays)")
else:
    SKIP_REASON = (f"back-compat corpus not found at {BACKCOMPAT} "
                   "($TDBFS_BACKCOMPAT_ARRAYS; unset it to use tests/data/backcompat_arrays)")


def require() -> None:
    """Skip the calling test, saying why, if the corpus folder is missing."""
    if not AVAILABLE:
        pytest.skip(SKIP_REASON)


def path(*parts: str) -> str:
    """A path inside the corpus (skipping the calling test if the corpus is missing)."""
    require()
    return os.path.join(BACKCOMPAT, *parts)


def array(folder: str) -> str:
    """The array of one corpus folder (e.g. "v02"), skipping the calling test if the corpus is missing."""
    require()
    found = dict(arrays())
    if folder not in found:
        raise LookupError(f"no array in folder {folder!r} of the back-compat corpus at {BACKCOMPAT}")
    return found[folder]

#: Folders whose array TileDB itself refuses: the reason tdbfs must report for each.
REFUSED = {
    "v0_pre_format_1.3.0": "pre-format generic tile (TileDB <= 1.3)",
    "experimental_UINT32_MAX": "0xffffffff",
}


def arrays() -> list[tuple[str, str]]:
    """(folder, array path) for every array of the corpus (one per folder of INDEX.md), folder order."""
    if not AVAILABLE:
        return []
    out = []
    for folder in sorted(os.listdir(BACKCOMPAT)):
        base = os.path.join(BACKCOMPAT, folder)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            if os.path.isdir(os.path.join(base, name)):
                out.append((folder, os.path.join(base, name)))
    return out


def copy_array(path: str, dest_dir) -> Path:
    """A copy of one corpus array under `dest_dir` (mounts and TileDB only ever see copies)."""
    import shutil
    dest = Path(dest_dir) / os.path.basename(path)
    if not dest.exists():
        shutil.copytree(path, dest)
    return dest
