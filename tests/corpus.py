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
