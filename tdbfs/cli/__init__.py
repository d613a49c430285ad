"""The `tdbfs` command: mount an array's decoded view, or read the view without FUSE.

One module per job: `parser` (the command line), `main` (dispatch and exit statuses), `browse` (ls,
cat, tree), `check_command`. Mounting is tdbfs/mount/, the check tdbfs/check/, and what they share
with the command line (errors, keys, opening the array) tdbfs/frontend/.
"""

from .main import main, run

__all__ = ["main", "run"]
