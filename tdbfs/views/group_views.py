"""The tree of a TileDB group (README.md, "Groups"): README.txt, group.yaml, group_details/,
metadata/ and members/, where each member is the whole tree of its array or group, built only
when first looked at.

A member that cannot be shown (missing, unreadable, of no known type) is a folder holding only
`problem.yaml`, so the others stay in view; a member leading back to a group above it is a
symbolic link to that group's folder in the tree, never followed by tdbfs.
"""

from __future__ import annotations

import posixpath
import time
from typing import Callable

from ..format.group import MARKER_FILE, STRUCTURE
from ..store.group_store import Cycle, GroupStore, MemberError
from .array_views import _gtile_info, _timestamps
from .common import KeyedDir, guarded, yaml_file
from .describe.group import describe_changes, describe_group_details
from .nodes import FOREVER, LIVE, BytesFile, DirNode, DynamicDir, SymlinkNode
from .readme import README_TEXT
from .render import to_yaml
from .array_folders import build_metadata_dir, with_byte_maps


def build_group_root(store: GroupStore, build_root) -> DirNode:
    """The tree of a group; `build_root` (tree.py) builds a member's own."""
    mtime = lambda: store.mtime("")
    readme = BytesFile(lambda: README_TEXT.encode(), FOREVER, mtime=store.mtime(""))
    group_yaml = BytesFile(guarded(lambda: to_yaml(group_summary(store)), store.problems, "", "group summary"),
                           LIVE, mtime=mtime)
    details_dir = KeyedDir(*with_byte_maps(
        store, lambda: [posixpath.basename(f) + ".yaml" for f in store.details_files()],
        lambda name: _details_file(store, name), store.details_files), mtime=lambda: store.mtime("__group"))
    members_dir = KeyedDir(lambda: [m.shown for m in store.members()], lambda name: _member_node(store, name, build_root),
                           mtime=mtime)
    children = {"README.txt": readme, "group.yaml": group_yaml, "group_details": details_dir,
                "metadata": build_metadata_dir(store), "members": members_dir}
    return DynamicDir(lambda: children, mtime)


def group_summary(store: GroupStore) -> dict:
    size = store.marker_size()
    members = []
    for member in store.members():
        m = member.member
        entry = {"name": m.name, "type": m.type_name, "uri": m.uri, "relative": m.relative,
                 "location": store.location(m), "entry": f"members/{member.shown}"}
        if member.file is not None:
            entry["details_file"] = member.file
        else:
            entry["found"] = "in the group's folder (a group written before TileDB 2.9 has no member list)"
        members.append(entry)
    history = []
    for h in store.history():
        entry = {"file": h.file}
        timestamps = _timestamps(store, h.file)
        if timestamps:
            entry["timestamps"] = timestamps
        if h.details is None:
            entry["decoded"] = False
        else:
            entry.update(describe_changes(h.details.version, h.added, h.removed, h.kept))
        history.append(entry)
    return {
        "uri": store.path,
        "checked": _checked(store),   # before the problems: what it counts has its problems listed
        "kind": "group",
        "format_version": store.format_version(),
        "marker_only": store.marker_only(),
        "marker": {"file": MARKER_FILE, "size": size} if size is not None else None,
        "members": members,
        "history": history,
        "counts": {"members": len(members), "details_files": len(history),
                   "metadata_files": len(store.metadata_files())},
        "problems": [p.to_dict() for p in store.findings()],
    }


def _checked(store: GroupStore) -> dict:
    """How far the problems go, here and in the members (store/checked.py)."""
    from ..store.group_checked import group_summary
    from ..store.group_store import Cycle, MemberError
    members = []
    for member in store.members():
        try:
            target = store.member_store(member.shown)
        except MemberError:
            target = None
        members.append(True if isinstance(target, Cycle) else target)   # a cycle: checked as the group above
    return group_summary(store, members)


def details_view(store: GroupStore, rel: str) -> dict:
    out: dict = {"file": rel}
    timestamps = _timestamps(store, rel)
    if timestamps:
        out["timestamps"] = timestamps
    out["generic_tile"] = _gtile_info(store, rel, STRUCTURE)
    out.update(describe_group_details(store.group_details(rel)))
    return out


def _details_file(store: GroupStore, name: str) -> BytesFile:
    rel = store.details_path(name[:-5])
    return yaml_file(lambda: details_view(store, rel), store.problems, rel, STRUCTURE, mtime=store.mtime(rel))


def _member_node(store: GroupStore, shown: str, build_root):
    try:
        target = store.member_store(shown)
    except (MemberError, KeyError):
        target = None
    if isinstance(target, Cycle):
        # from members/ of the group at depth d up to the group at depth k: members/x/ per level
        ups = (len(store.ancestors) - 1 - target.depth) * 2 + 1
        return SymlinkNode("/".join([".."] * ups))
    return _MemberDir(store, shown, build_root)


class _MemberDir(DirNode):
    """members/<name>: the member's own tree, built when first listed, again when the member changes."""

    def __init__(self, store: GroupStore, shown: str, build_root):
        self._store = store
        self._shown = shown
        self._build_root = build_root
        self._built = None   # (member store, its root)

    def _root(self) -> DirNode:
        target = self._store.member_store(self._shown)
        if isinstance(target, Cycle):
            raise KeyError(self._shown)   # it became a cycle since listed: the next listing shows the link
        if self._built is None or self._built[0] is not target:
            root = (build_group_root(target, self._build_root) if isinstance(target, GroupStore)
                    else self._build_root(target))
            self._built = (target, root)
        return self._built[1]

    def _problem(self, exc: MemberError) -> dict:
        member = self._store.member(self._shown)
        out = {}
        if member is not None:
            m = member.member
            out["member"] = {"name": m.name, "type": m.type_name, "uri": m.uri, "relative": m.relative,
                             "location": self._store.location(m)}
        out["problem"] = exc.problem.to_dict()
        return out

    def children(self):
        try:
            return self._root().children()
        except MemberError as exc:
            shown = self._problem(exc)
            return {"problem.yaml": BytesFile(lambda: to_yaml(shown), LIVE)}
        except KeyError:
            return {}

    def child(self, name: str):
        try:
            return self._root().child(name)
        except (MemberError, KeyError):
            return self.children().get(name)

    def mtime(self) -> float:
        try:
            return self._root().mtime()
        except (MemberError, KeyError):
            return 0.0


def access_masks(store: GroupStore, root_mask: int, ttl: float = 1.0) -> Callable[[str], int]:
    """The read/execute bits of the node at a path of the tree of `store`, for the mount to show and to
    check callers against: `root_mask` (the group's own folder's) and, from members/<name>/ down, those
    of that member's own location too, level by level (`GroupStore.member_access`: its folder and the
    reach of its ancestors), so no one reads through the group a member they could not read on disk.
    A member with no store to show keeps its group's bits (its problem.yaml is the group's finding);
    one in an object store too. Each member's bits are worked out again after `ttl` seconds."""
    found: dict[tuple, tuple] = {}   # member names from the root -> (its store, its bits, until when)

    def mask_at(path: str) -> int:
        parts = [p for p in path.split("/") if p]
        mask, group, key = root_mask, store, ()
        for i in range(0, len(parts) - 1, 2):
            if parts[i] != "members" or not isinstance(group, GroupStore):
                break
            key += (parts[i + 1],)
            now = time.monotonic()
            hit = found.get(key)
            if hit is None or hit[2] < now:
                target, bits = group.member_access(parts[i + 1])
                if len(found) > 10000:
                    found.clear()
                hit = found[key] = (target, bits, now + ttl)
            target, bits = hit[0], hit[1]
            if target is None:
                break
            if bits is not None:
                mask &= bits
            group = target
        return mask

    return mask_at
