"""The `tdbfs` command: mount an array's decoded view, or read the view without FUSE.

One module per job: `parser` (the command line), `main` (dispatch and exit statuses), `common`
(errors, opening the array), `browse` (ls, cat, tree), `check_command`, `mount` and `daemon`
(the FUSE daemon, foreground or spawned), `mountpoints`.
"""

from .main import main, run

__all__ = ["main", "run"]
