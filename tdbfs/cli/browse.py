"""`tdbfs ls`, `cat` and `tree`: the view read without FUSE."""

from __future__ import annotations

import posixpath
import stat
import sys
import time

from ..frontend import common
from ..frontend.common import CliError, error
from ..location import Location


def root_of(args):
    from ..frontend.remote_options import browse_settings

    location = Location.parse(args.array)
    # keywords only when given, so that open_root(location, cache_mb) stays the whole interface otherwise
    extra: dict = {"key_file": args.key_file} if args.key_file else {}
    if location.remote or getattr(args, "options", None) or getattr(args, "cache_dir", None):
        extra["remote"] = browse_settings(args)
    from ..store import digest_pool
    digest_pool.enable(digest_pool.default_jobs())   # `tdbfs cat ARRAY array.yaml` as the mount renders it
    return common.open_root(location, args.cache_mb, **extra)


def lookup(root, path: str, follow_last: bool = True):
    """(node, canonical path) of `path` in the view, following symlinks and `..` like a shell."""
    from ..views.nodes import FolderUnreadable, LinkLoop, NoSuchPath, NotAFolder, walk

    try:
        return walk(root, path, follow_links=True, follow_last=follow_last)
    except NotAFolder as exc:
        raise CliError(f"not a folder in the view: {exc.path}") from None
    except NoSuchPath:
        raise CliError(f"no such path in the view: {path.strip('/')}") from None
    except LinkLoop:
        raise CliError(f"too many levels of symbolic links: {path}") from None
    except FolderUnreadable as exc:
        raise CliError(f"{exc.path or '/'}: cannot be read: {exc}") from None


def _kind_suffix(node) -> str:
    from ..views.nodes import DirNode

    return "/" if isinstance(node, DirNode) else ""


def _long_line(name: str, node) -> tuple[str, str | None]:
    """One `ls -l` line, and the reason if the size could not be computed."""
    from ..views.nodes import DirNode, FileNode, SymlinkNode, ViewError

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
    from ..views.nodes import DirNode, ViewError

    root = root_of(args)
    node, where = lookup(root, args.path)
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
        error(p)
    return 1 if problems else 0


def cmd_cat(args) -> int:
    from ..views.nodes import DirNode, FileNode, ViewError

    root = root_of(args)
    node, where = lookup(root, args.path)
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
    from ..views.nodes import DirNode, SymlinkNode, ViewError

    root = root_of(args)
    node, where = lookup(root, args.path)
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
        error(p)
    return 1 if problems else 0
