"""`tdbfs COMMAND ...`: parse, run, and turn every failure into one line and an exit status."""

from __future__ import annotations

import os
import sys

from ..format.errors import FormatError
from ..text import shown
from . import fstab
from .common import CliError, error
from .parser import UsageError, build_parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if fstab.is_helper_call(argv):  # `tdbfs SOURCE MNT -o OPTS`, as mount.fuse3 runs it for fuse.tdbfs
        return fstab.main(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        error(str(exc))
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return args.func(args)
    except CliError as exc:
        error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tdbfs cat ... | head`
        _silence_stdout()
        return 0
    except FormatError as exc:  # damage a view let through: where it is, as the problem lists say it
        error(f"cannot be read: {shown(str(exc))}")
        return 1
    except Exception as exc:  # a bug: still one line, unless --debug
        if getattr(args, "debug", False):
            import traceback
            traceback.print_exc()
        error(f"internal error: {type(exc).__name__}: {exc}")
        return 1


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
