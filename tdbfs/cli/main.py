"""`tdbfs COMMAND ...`: parse, run, and turn every failure into one line and an exit status."""

from __future__ import annotations

import os
import sys

from ..text import shown
from ..frontend.common import BLAS_ENV, CliError, error
from .parser import UsageError, build_parser


def run() -> None:
    """The `tdbfs` command as a process's entry point (the console script, `python -m tdbfs`): main(),
    then exit with its status."""
    sys.exit(main(entry=True))


def fstab_helper() -> int:
    """The `mount.fuse.tdbfs` console script, which mount.fuse3 runs for an fstab line of type
    fuse.tdbfs (mount/fstab.py)."""
    from ..mount import fstab
    return fstab.main(None, main)


def main(argv=None, *, entry: bool = False) -> int:
    """Run the command of `argv` (default: this process's arguments); its exit status. `entry`: called by
    run(), so a command that leaves nothing of this process to tear down (a background mount, whose
    daemon serves on its own: `args.nothing_to_tear_down`) ends the process at once when it succeeds."""
    argv = sys.argv[1:] if argv is None else argv
    for key, value in BLAS_ENV.items():
        os.environ.setdefault(key, value)
    if is_helper_call(argv):  # `tdbfs SOURCE MNT -o OPTS`, as mount.fuse3 runs it for fuse.tdbfs
        from ..mount import fstab
        return fstab.main(argv, main)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        error(str(exc))
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    args.main = main   # what a background mount's forked daemon runs (mount/daemon_start.py)
    try:
        code = args.func(args)
    except CliError as exc:
        error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tdbfs cat ... | head`
        _silence_stdout()
        return 0
    except Exception as exc:
        # imported here: `tdbfs mount` starts its daemon sooner without the format's modules
        from ..format.errors import FormatError
        if isinstance(exc, FormatError):  # damage a view let through: where it is, as the problem lists say it
            error(f"cannot be read: {shown(str(exc))}")
            return 1
        # a bug: still one line, unless --debug
        if getattr(args, "debug", False):
            import traceback
            traceback.print_exc()
        error(f"internal error: {type(exc).__name__}: {exc}")
        return 1
    if entry and getattr(args, "nothing_to_tear_down", False):
        _leave_at_once(code)
    return code


def _leave_at_once(code: int) -> None:
    """Exit without the interpreter's teardown of every module it imported: ~8 ms of a background
    `tdbfs mount`, between its mount going live and the shell's prompt (docs/performance.md §5)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def is_helper_call(argv) -> bool:
    """`tdbfs SOURCE MNT ...` as mount.fuse3 runs it (fstab.py): a command name never holds a '/', a
    source (an absolute path, which is all fstab allows, or a URL) always does."""
    return len(argv) >= 2 and "/" in argv[0] and not argv[0].startswith("-")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
