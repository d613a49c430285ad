"""The `tdbfs` command: mount an array's decoded view, or read the view without FUSE."""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import posixpath
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import time

from . import __version__
from .format.errors import FormatError
from .text import shown

PROG = "tdbfs"
DEFAULT_CACHE_MB = 512
MOUNT_WAIT_S = 10.0
#: glibc malloc tuning for the daemon (PERF_NOTES: 0.4-0.6 -> 1.0-1.3 GB/s on the decode
#: path). glibc reads it only at process start, so it is set when the daemon is spawned.
MALLOC_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "33554432",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
    "MALLOC_TOP_PAD_": "67108864",
}

DESCRIPTION = """\
tdbfs shows a TileDB array's on-disk structures (schemas, fragments, footers,
R-trees, tiles, commits, metadata) as a read-only tree of decoded files.
Mount it with FUSE, or read the same tree without FUSE with ls, cat and tree.
"""

EPILOG = """\
examples:
  tdbfs mount /data/my_array /mnt/arr      mount in the background, return when ready
  ls /mnt/arr/fragments
  cat /mnt/arr/schema/current.yaml
  tdbfs umount /mnt/arr
  tdbfs mount -f --log /tmp/tdbfs.log /data/my_array /mnt/arr   stay in the foreground
  tdbfs ls -l /data/my_array fragments     list a folder of the view without FUSE
  tdbfs cat /data/my_array array.yaml      print one file of the view
  tdbfs tree --depth 2 /data/my_array      show the view as a tree
  tdbfs check /data/my_array               check every structure and tile (fsck)

exit status:
  0  success
  1  runtime error: array not found or not a TileDB array, mount point missing,
     busy or not empty, FUSE unavailable, path not in the tree, view unreadable
  2  usage error (bad command line)
  check: 0 clean, 1 problems found, 2 could not run (see 'tdbfs check --help')
"""


class CliError(Exception):
    """A failure to report as one line `tdbfs: error: ...`."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("mount", help="mount ARRAY's view at MNT (read-only)", formatter_class=fmt,
                       description="Mount the decoded view of ARRAY at the empty folder MNT.\n"
                                   "Without -f the daemon runs in the background and the command\n"
                                   "returns once the mount answers.",
                       epilog="mount options (-o): threads (multi-threaded daemon), attr_timeout=S,\n"
                              "entry_timeout=S, negative_timeout=S, fsname=NAME, allow_other, and any\n"
                              "other libfuse option. Not supported: rw, large_read.\n\n"
                              "examples:\n  tdbfs mount /data/my_array /mnt/arr\n"
                              "  tdbfs mount -o allow_other --cache-mb 2048 /data/my_array /mnt/arr\n"
                              "  tdbfs mount -f --debug --log /tmp/tdbfs.log /data/my_array /mnt/arr\n")
    p.add_argument("array", metavar="ARRAY", help="TileDB array folder")
    p.add_argument("mountpoint", metavar="MNT", help="empty folder to mount on")
    p.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground (the daemon itself)")
    p.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT]",
                   help="mount options, comma separated (repeatable)")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N",
                   help=f"memory for decoded data, in MiB (default {DEFAULT_CACHE_MB})")
    p.add_argument("--log", metavar="FILE", help="daemon log file (default: stderr with -f, else none)")
    p.add_argument("--debug", action="store_true", help="verbose log, tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    p.add_argument("--spawned", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--key-fd", type=int, default=None, help=argparse.SUPPRESS)  # the key from the parent
    p.set_defaults(func=cmd_mount)

    p = sub.add_parser("umount", aliases=["unmount"], help="unmount a tdbfs mount", formatter_class=fmt,
                       description="Unmount MNT (fusermount3 -u, fusermount -u or umount).")
    p.add_argument("mountpoint", metavar="MNT")
    p.add_argument("-z", "--lazy", action="store_true", help="lazy unmount (detach now, clean up when not busy)")
    p.set_defaults(func=cmd_umount)

    p = sub.add_parser("ls", help="list a folder of the view (no FUSE needed)", formatter_class=fmt,
                       description="List PATH (default: the top) of ARRAY's view, one entry per line,\n"
                                   "folders with a trailing '/'.",
                       epilog="examples:\n  tdbfs ls /data/my_array\n  tdbfs ls -l /data/my_array fragments\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("path", metavar="PATH", nargs="?", default="")
    p.add_argument("-l", "--long", action="store_true", help="long format: mode, size, time, name")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("cat", help="write one file of the view to stdout (no FUSE needed)", formatter_class=fmt,
                       epilog="examples:\n  tdbfs cat /data/my_array array.yaml\n"
                              "  tdbfs cat /data/my_array fragments/F/attrs/a0/tile_0.bin | od -An -tu4\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    p.set_defaults(func=cmd_cat)

    p = sub.add_parser("tree", help="show the view as an indented tree (no FUSE needed)", formatter_class=fmt,
                       epilog="examples:\n  tdbfs tree /data/my_array\n  tdbfs tree --depth 1 /data/my_array fragments\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("path", metavar="PATH", nargs="?", default="")
    p.add_argument("-L", "--depth", type=_positive_int, default=None, metavar="N",
                   help="descend at most N levels")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("check", help="check every structure and tile of ARRAY (fsck; no FUSE needed)",
                       formatter_class=fmt,
                       description="Decode every structure and every tile of ARRAY, verify every checksum,\n"
                                   "offset and size against the files, the footers against the schema and\n"
                                   "the commits against the fragment folders. Prints one line per problem,\n"
                                   "'FILE:OFFSET: STRUCTURE: MESSAGE' (OFFSET '-' when none applies), then a\n"
                                   "summary. Never writes to the array.",
                       epilog="exit status:\n  0  clean (warnings, such as fragments consolidated but not yet\n"
                              "     vacuumed, do not count)\n  1  problems found\n"
                              "  2  could not run: not an array, unreadable, or a usage error\n\n"
                              "examples:\n  tdbfs check /data/my_array\n"
                              "  tdbfs check --json /data/my_array | jq .problems\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    p.add_argument("-q", "--quiet", action="store_true", help="no problem lines and no progress, only the summary")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    p.set_defaults(func=cmd_check)
    return parser


KEY_FILE_HELP = ("file holding the AES-256-GCM key of an encrypted array: 32 bytes (the 32-character string\n"
                 "given to TileDB), 64 hex digits or 44 base64 characters; default: $TDBFS_KEY_FILE,\n"
                 "else the value of $TDBFS_ENCRYPTION_KEY. Never give the key itself on the command line")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least 1")
    return value


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        _error(str(exc))
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return args.func(args)
    except CliError as exc:
        _error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tdbfs cat ... | head`
        _silence_stdout()
        return 0
    except FormatError as exc:  # damage a view let through: where it is, as the problem lists say it
        _error(f"cannot be read: {shown(str(exc))}")
        return 1
    except Exception as exc:  # a bug: still one line, unless --debug
        if getattr(args, "debug", False):
            import traceback
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc}")
        return 1


def _error(message: str) -> None:
    message = " ".join(shown(str(message)).split())  # always one line
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# --------------------------------------------------------------------------- check

def cmd_check(args) -> int:
    import json
    from .check import check_array

    try:
        store = _open_store(os.path.abspath(args.array), args.cache_mb, args.key_file)
    except CliError as exc:
        raise CliError(str(exc), code=2) from None
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    show_bar = not args.quiet and not args.json and sys.stderr.isatty()
    try:
        result = check_array(store, _progress_bar if show_bar else None)
    except OSError as exc:   # the array itself unreadable (permissions, I/O): could not run
        raise CliError(f"cannot check {args.array}: {exc}", code=2) from None
    if show_bar:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, default=str))
    else:
        if not args.quiet:
            for p in result.problems:
                print(("warning: " if p.severity != "error" else "") + p.line())
        print(result.summary())
    return 0 if result.clean else 1


def _progress_bar(done: int, total: int, what: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r\033[K[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {what[:40]}")
    sys.stderr.flush()


# --------------------------------------------------------------------------- the view

def _load_key(key_file: str | None):
    """The encryption key from --key-file, else from the environment, else None; never from argv."""
    from .format.reversers.keys import BadKeyError, key_from_environment, read_key_file

    try:
        return read_key_file(key_file) if key_file else key_from_environment()
    except BadKeyError as exc:
        raise CliError(str(exc)) from None


def _open_store(array: str, cache_mb: int, key_file: str | None = None, key=None):
    from .store import NotAnArrayError, open_array

    if key is None:
        key = _load_key(key_file)
    try:
        return open_array(array, cache_bytes=cache_mb << 20, key=key)
    except FileNotFoundError as exc:
        raise CliError(_message(exc, f"array not found: {array}")) from None
    except NotAnArrayError as exc:
        raise CliError(_message(exc, f"not a TileDB array: {array}")) from None
    except PermissionError as exc:
        raise CliError(f"cannot read {array}: {exc.strerror}") from None


def _message(exc: Exception, default: str) -> str:
    text = str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) else ""
    return text if text and len(exc.args) == 1 else default


def _open_root(array: str, cache_mb: int = DEFAULT_CACHE_MB, key_file: str | None = None):
    from .views.tree import build_root

    # ls/cat/tree report a failing view in their own one-line error; without this,
    # Python's last-resort handler would also print the views' log warning.
    tdbfs_log = logging.getLogger("tdbfs")
    if not tdbfs_log.handlers and not logging.getLogger().handlers:
        tdbfs_log.addHandler(logging.NullHandler())
    return build_root(_open_store(os.path.abspath(array), cache_mb, key_file))


def _root_of(args):
    # key_file only when given, so that _open_root(array, cache_mb) stays the whole interface otherwise
    if args.key_file:
        return _open_root(args.array, args.cache_mb, key_file=args.key_file)
    return _open_root(args.array, args.cache_mb)


def _lookup(root, path: str, follow_last: bool = True):
    """(node, canonical path) of `path` in the view, following symlinks like a shell would."""
    from .views.nodes import DirNode, SymlinkNode, ViewError

    todo = [p for p in path.split("/") if p not in ("", ".")]
    done: list[str] = []
    node = root
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            if done:
                done.pop()
            node = _lookup(root, "/".join(done), follow_last=True)[0] if done else root
            continue
        if not isinstance(node, DirNode):
            raise CliError(f"not a folder in the view: {'/'.join(done)}")
        try:
            kids = node.children()
        except ViewError as exc:
            raise CliError(f"{'/'.join(done) or '/'}: cannot be read: {exc}") from None
        if part not in kids:
            raise CliError(f"no such path in the view: {path.strip('/')}")
        child = kids[part]
        if isinstance(child, SymlinkNode) and (todo or follow_last):
            hops += 1
            if hops > 40:
                raise CliError(f"too many levels of symbolic links: {path}")
            target = child.target
            if target.startswith("/"):
                done = []
                node = root
            todo = [p for p in target.split("/") if p not in ("", ".")] + todo
            continue
        node = child
        done.append(part)
    return node, "/".join(done)


def _kind_suffix(node) -> str:
    from .views.nodes import DirNode

    return "/" if isinstance(node, DirNode) else ""


def _long_line(name: str, node) -> tuple[str, str | None]:
    """One `ls -l` line, and the reason if the size could not be computed."""
    from .views.nodes import DirNode, FileNode, SymlinkNode, ViewError

    problem = None
    mode = stat.filemode(node.mode if isinstance(node, SymlinkNode) else node.mode & ~0o222)
    if isinstance(node, FileNode):
        try:
            size = str(node.size())
        except ViewError as exc:
            size, problem = "?", str(exc)
    elif isinstance(node, SymlinkNode):
        size = str(len(node.target.encode()))
    else:
        size = "-"
    try:
        mtime = node.mtime()
    except Exception:
        mtime = 0
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime)) if mtime else "-"
    shown = name + ("/" if isinstance(node, DirNode) else "")
    if isinstance(node, SymlinkNode):
        shown += f" -> {node.target}"
    return f"{mode} {size:>12} {when:>16} {shown}", problem


def cmd_ls(args) -> int:
    from .views.nodes import DirNode, ViewError

    root = _root_of(args)
    node, where = _lookup(root, args.path)
    if isinstance(node, DirNode):
        try:
            entries = list(node.children().items())
        except ViewError as exc:
            raise CliError(f"{where or '/'}: cannot be read: {exc}") from None
    else:
        entries = [(posixpath.basename(where), node)]
    out = sys.stdout
    problems = []
    for name, child in entries:
        if args.long:
            line, problem = _long_line(name, child)
            if problem:
                problems.append(f"{posixpath.join(where, name)}: cannot be read: {problem}")
        else:
            line = name + _kind_suffix(child)
        out.write(line + "\n")
    out.flush()
    for p in problems:
        _error(p)
    return 1 if problems else 0


def cmd_cat(args) -> int:
    from .views.nodes import DirNode, FileNode, ViewError

    root = _root_of(args)
    node, where = _lookup(root, args.path)
    if isinstance(node, DirNode):
        raise CliError(f"is a folder, not a file: {where or '/'} (use 'tdbfs ls')")
    if not isinstance(node, FileNode):
        raise CliError(f"not a file: {where}")
    out = sys.stdout.buffer
    chunk = 1 << 20
    try:
        size = node.size()
        offset = 0
        while offset < size:
            data = node.read(offset, min(chunk, size - offset))
            if not data:
                break
            out.write(data)
            offset += len(data)
    except ViewError as exc:
        out.flush()
        raise CliError(f"{where}: cannot be read: {exc}") from None
    out.flush()
    return 0


def cmd_tree(args) -> int:
    from .views.nodes import DirNode, SymlinkNode, ViewError

    root = _root_of(args)
    node, where = _lookup(root, args.path)
    out = sys.stdout
    counts = {"dirs": 0, "files": 0}
    problems: list[str] = []

    def walk(dnode, dpath, prefix, depth):
        try:
            items = list(dnode.children().items())
        except ViewError as exc:
            problems.append(f"{dpath or '/'}: cannot be read: {exc}")
            out.write(f"{prefix}└── [error: {exc}]\n")
            return
        for i, (name, child) in enumerate(items):
            last = i == len(items) - 1
            branch, extend = ("└── ", "    ") if last else ("├── ", "│   ")
            if isinstance(child, DirNode):
                counts["dirs"] += 1
                out.write(f"{prefix}{branch}{name}/\n")
                if args.depth is None or depth < args.depth:
                    walk(child, posixpath.join(dpath, name), prefix + extend, depth + 1)
            elif isinstance(child, SymlinkNode):
                counts["files"] += 1
                out.write(f"{prefix}{branch}{name} -> {child.target}\n")
            else:
                counts["files"] += 1
                out.write(f"{prefix}{branch}{name}\n")

    if isinstance(node, DirNode):
        out.write((where + "/" if where else "/") + "\n")
        walk(node, where, "", 1)
    else:
        counts["files"] += 1
        out.write(where + "\n")
    out.write(f"\n{counts['dirs']} directories, {counts['files']} files\n")
    out.flush()
    for p in problems:
        _error(p)
    return 1 if problems else 0


# --------------------------------------------------------------------------- mounts

def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_fstype(path: str) -> str | None:
    """The file system type mounted exactly at `path` ('fuse.tdbfs', ...), or None."""
    real = os.path.realpath(path)
    found = None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                fields = left.split()
                if sep and len(fields) >= 5 and _unescape_mountinfo(fields[4]) == real:
                    found = right.split()[0] if right.split() else "?"
    except OSError:
        try:
            return "?" if os.path.ismount(path) else None
        except OSError:
            return None
    return found


def _check_mountpoint(mnt: str, array: str) -> None:
    try:
        st = os.stat(mnt)
    except FileNotFoundError:
        raise CliError(f"mount point not found: {mnt}") from None
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            raise CliError(f"mount point {mnt} is a stale FUSE mount (its daemon is gone): "
                           f"run 'tdbfs umount {mnt}' first") from None
        raise CliError(f"cannot use mount point {mnt}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CliError(f"mount point is not a folder: {mnt}")
    if mount_fstype(mnt) is not None or os.path.ismount(mnt):
        try:
            os.listdir(mnt)
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:
                raise CliError(f"mount point {mnt} is a stale FUSE mount (its daemon is gone): "
                               f"run 'tdbfs umount {mnt}' first") from None
        raise CliError(f"mount point {mnt} is busy: something is already mounted there")
    try:
        if os.listdir(mnt):
            raise CliError(f"mount point {mnt} is not empty")
    except PermissionError:
        raise CliError(f"cannot use mount point {mnt}: permission denied") from None
    real_mnt, real_array = os.path.realpath(mnt), os.path.realpath(array)
    if os.path.commonpath([real_mnt, real_array]) == real_array:
        raise CliError(f"mount point {mnt} must not be inside the array")


def cmd_mount(args) -> int:
    array = os.path.abspath(args.array)
    mnt = os.path.abspath(args.mountpoint)
    if args.foreground:
        from . import fuse_ops
        # before numpy or the store start threads that would otherwise take the signal
        fuse_ops.catch_stop_signals()
        key = _read_key_fd(args.key_fd) if args.key_fd is not None else None
        options = _fuse_options(args)
        if "fsname" not in _option_keys(args.options):
            options.fsname = fuse_ops.default_fsname(array)
        store = _open_store(array, args.cache_mb, args.key_file, key=key)
        _check_mountpoint(mnt, array)  # a spawned daemon too: it starts before its parent has checked
        problem = fuse_ops.fuse_problem()
        if problem:
            raise CliError(f"FUSE is not available: {problem}")
        return _run_daemon(args, store, mnt, options)

    # A background mount starts its daemon as soon as the mount point is known to be free:
    # the daemon's interpreter start-up and imports are most of the time to a live mount,
    # and the parent's other checks (options, FUSE) run meanwhile on the other core. Any
    # failure then stops the daemon. The array itself is checked by the daemon, whose error
    # becomes ours.
    try:
        _check_mountpoint(mnt, array)
    except CliError:
        _open_store(array, args.cache_mb, args.key_file)  # an unusable array is reported first, as always
        raise
    # read here, handed over through a pipe: the daemon's environment and argv, which
    # stay in /proc for the life of the mount, never hold the key or where it is
    key = _load_key(args.key_file)

    def check():
        from . import fuse_ops
        _fuse_options(args)
        problem = fuse_ops.fuse_problem()
        if problem:
            _open_store(array, args.cache_mb, key=key)
            raise CliError(f"FUSE is not available: {problem}")
    return _spawn_daemon(args, array, mnt, check=check, key=key)


def _option_keys(option_strings) -> set:
    return {item.partition("=")[0].strip() for text in option_strings or () for item in text.split(",")}


def _read_key_fd(fd: int):
    """The key the parent wrote to pipe `fd`; the pipe is closed once read."""
    from .format.reversers.keys import BadKeyError, parse_key

    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read(4096)
    except OSError as exc:
        raise CliError(f"cannot read the key from the parent process: {exc.strerror}") from None
    try:
        return parse_key(raw, "the key handed over by 'tdbfs mount'")
    except BadKeyError as exc:
        raise CliError(str(exc)) from None


def _fuse_options(args):
    from . import fuse_ops
    try:
        return fuse_ops.FuseOptions.parse(args.options, debug=False)
    except ValueError as exc:
        raise CliError(str(exc), code=2) from None


def _setup_logging(log_file: str | None, debug: bool) -> None:
    if log_file:
        try:
            # names that are not UTF-8 reach the log escaped, never as a "Logging error"
            handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            raise CliError(f"cannot write the log file {log_file}: {exc.strerror}") from None
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        logging.getLogger("fuse").setLevel(logging.WARNING)  # mfusepy's per-call chatter


def _run_daemon(args, store, mnt: str, options) -> int:
    """The daemon itself: serve until unmounted."""
    from . import fuse_ops
    from .views.tree import build_root

    log_file = os.path.abspath(args.log) if args.log else None
    _setup_logging(log_file, args.debug)
    root = build_root(store)
    # Decoding a tile makes hundreds of small records; with the default thresholds the
    # collector ran every few tiles and rescanned every parsed object (~10% of the daemon's
    # time on a sequential read). What exists now lives as long as the daemon: freeze it.
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)

    on_init = None
    if args.spawned:
        def on_init():
            # The mount is live: stop writing to the pipe the parent reads (it sees
            # EOF and knows startup is over); from now on stderr is the log or nothing.
            fd = os.open(log_file or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(fd, 2)
            os.close(fd)

    try:
        perm_mask = fuse_ops.access_mask(store.path)
    except OSError:
        perm_mask = 0o500  # cannot tell who else may read the array: only its mounter
    logging.getLogger("tdbfs").info("tdbfs %s: serving %s on %s (cache %d MiB, pid %d, modes %s)",
                                    __version__, store.path, mnt, args.cache_mb, os.getpid(), oct(perm_mask))
    try:
        signum = fuse_ops.serve(root, mnt, options, on_init=on_init, perm_mask=perm_mask)
    except fuse_ops.MountError as exc:
        raise CliError(str(exc)) from None
    except RuntimeError as exc:
        raise CliError(f"FUSE is not available: {exc}") from None
    # stopped by a signal: unmounted, so no error; Ctrl-C keeps the shell's 128+SIGINT
    return 130 if signum == signal.SIGINT else 0


def _daemon_env() -> dict:
    """The daemon's environment: glibc's malloc tuning, and this interpreter's module path
    in PYTHONPATH, so the daemon can start with `-S` (no site.py: ~12 ms less start-up,
    most of it the editable install's import hook) and still import what we import.
    Without the key variables: the key goes through a pipe (see `_spawn_daemon`)."""
    from .format.reversers.keys import ENV_KEY, ENV_KEY_FILE

    env = {k: v for k, v in os.environ.items() if k not in (ENV_KEY, ENV_KEY_FILE)}
    for key, value in MALLOC_ENV.items():
        env.setdefault(key, value)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths: list[str] = []
    for p in [pkg_parent] + env.get("PYTHONPATH", "").split(os.pathsep) + sys.path:
        if p and os.path.isabs(p) and p not in paths:
            paths.append(p)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _spawn_daemon(args, array: str, mnt: str, check=None, key=None) -> int:
    """Start `tdbfs mount -f` in the background; return once the mount answers.

    `check()`, run once the daemon is started, may raise CliError: the daemon is then stopped.
    `key` (an EncryptionKey) reaches the daemon through a pipe it reads once (--key-fd)."""
    cmd = [sys.executable, "-S", "-m", "tdbfs.cli", "mount", "-f", "--spawned", "--cache-mb", str(args.cache_mb)]
    for opt in args.options:
        cmd += ["-o", opt]
    if args.log:
        cmd += ["--log", os.path.abspath(args.log)]
    if args.debug:
        cmd.append("--debug")
    pass_fds: tuple = ()
    if key is not None:
        read_fd, write_fd = os.pipe()
        try:
            # the one place the key bytes leave an EncryptionKey on purpose; 32 bytes are
            # far below a pipe's buffer, so this never waits for the daemon
            os.write(write_fd, key.reveal())
        finally:
            os.close(write_fd)
        pass_fds = (read_fd,)
        cmd += ["--key-fd", str(read_fd)]
    cmd += ["--", array, mnt]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True, cwd="/", env=_daemon_env(), close_fds=True,
                                pass_fds=pass_fds)
    finally:
        for fd in pass_fds:
            os.close(fd)
    if check is not None:
        try:
            check()
        except BaseException:
            _stop_daemon(proc, mnt)
            raise
    deadline = time.monotonic() + MOUNT_WAIT_S
    captured = bytearray()
    fd = proc.stderr.fileno()
    # 1. read the daemon's stderr until it closes it (mount live) or exits
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            captured += chunk
        elif proc.poll() is not None:
            captured += _drain(fd)
            break
    # 2. wait until the mount answers
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if mount_fstype(mnt) is not None:
            try:
                os.listdir(mnt)
                proc.stderr.close()
                return 0
            except OSError:
                pass
        time.sleep(0.02)
    if proc.poll() is not None:
        proc.stderr.close()
        raise CliError(_daemon_failure(bytes(captured), proc.returncode))
    _stop_daemon(proc, mnt)  # still running but not answering: give up cleanly
    raise CliError(f"the daemon did not answer within {MOUNT_WAIT_S:.0f} s"
                   + (f" (see {args.log})" if args.log else " (retry with --log FILE --debug)"))


def _stop_daemon(proc, mnt: str) -> None:
    """Stop a daemon the parent gave up on, and undo its mount if it got that far."""
    proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stderr.close()
    if mount_fstype(mnt) is not None:
        _unmount(mnt, lazy=True)


def _drain(fd: int) -> bytes:
    out = bytearray()
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out += chunk
    return bytes(out)


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _daemon_failure(stderr: bytes, returncode: int) -> str:
    """One line from what a daemon that died at startup wrote: its own error, and libfuse's."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    prefix = f"{PROG}: error: "
    ours = [ln[len(prefix):] for ln in lines if ln.startswith(prefix)]
    libfuse = [ln for ln in lines if not ln.startswith(prefix) and not _LOG_LINE.match(ln)
               and not ln.startswith(("Traceback", "File ", "  "))]
    if ours and libfuse and libfuse[-1] not in ours[-1]:
        return f"{ours[-1]}: {libfuse[-1]}"
    if ours:
        return ours[-1]
    if libfuse:
        return f"mount failed: {libfuse[-1]}"
    return f"mount failed: the daemon exited with status {returncode}"


def _unmount(mnt: str, lazy: bool = False) -> tuple[bool, str]:
    attempts = []
    if shutil.which("fusermount3"):
        attempts.append(["fusermount3", "-u"] + (["-z"] if lazy else []))
    if shutil.which("fusermount"):
        attempts.append(["fusermount", "-u"] + (["-z"] if lazy else []))
    if shutil.which("umount"):
        attempts.append(["umount"] + (["-l"] if lazy else []))
    message = "no unmount tool found (install fuse3: apt-get install fuse3)"
    for cmd in attempts:
        try:
            res = subprocess.run(cmd + [mnt], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            message = str(exc)
            continue
        if res.returncode == 0:
            return True, ""
        text = (res.stderr or res.stdout).strip().splitlines()
        message = text[-1] if text else f"{cmd[0]} exited with status {res.returncode}"
        if "busy" in message.lower():
            break
    return False, message


def cmd_umount(args) -> int:
    mnt = os.path.abspath(args.mountpoint)
    fstype = mount_fstype(mnt)
    if fstype is None:
        if not os.path.lexists(mnt):
            raise CliError(f"mount point not found: {mnt}")
        raise CliError(f"{mnt} is not mounted")
    if not fstype.startswith("fuse") and fstype != "?":
        raise CliError(f"{mnt} is not a tdbfs mount (it is {fstype})")
    ok, message = _unmount(mnt, lazy=args.lazy)
    if not ok:
        hint = " (a process is using it; close it or use 'tdbfs umount -z')" if "busy" in message.lower() else ""
        raise CliError(f"cannot unmount {mnt}: {message}{hint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
