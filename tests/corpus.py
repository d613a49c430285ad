"""Where the back-compat corpus of real arrays is: $TDBFS_BACKCOMPAT_ARRAYS, or ../shared beside the repo.

Tests only read it in place (or copy arrays to a temporary folder); never write there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parent.parent
BACKCOMPAT = os.environ.get("TDBFS_BACKCOMPAT_ARRAYS") or str(_REPO.parent / "shared" / "backcompat_arrays")
AVAILABLE = os.path.isdir(BACKCOMPAT)
SKIP_REASON = (f"back-compat corpus not found at {BACKCOMPAT} "
               "(set TDBFS_BACKCOMPAT_ARRAYS to the shared/backcompat_arrays folder)")


def require() -> None:
    if not AVAILABLE:
        pytest.skip(SKIP_REASON)

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
