"""`tdbfs salvage` (this package is `salvaging`: `tdbfs.salvage` is the library's function): a new array TileDB
opens, holding every cell of the source that survives.

Modules: plan.py (what the copy holds, each fragment checked as `tdbfs check` checks it); copy.py
(byte-for-byte copies and commit markers); rewrite.py (a damaged fragment's surviving cells written
again with tiledb-py, the `[salvage]` extra); report.py (`salvage.yaml` and the totals); run.py (the
build, in a folder renamed to DEST at the end). The command line (cli/salvage_command.py) and the
library (`tdbfs.salvage`, library/frontends.py) open the source and call `salvage_store`.
"""

from __future__ import annotations

from .plan import SalvageError
from .run import salvage_store

__all__ = ["SalvageError", "salvage_store"]
