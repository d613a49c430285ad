"""How far a group's check has gone (group.yaml's `checked:`): its own files, and each member's every
structure but the data tiles, recursively (store/checked.py keeps the marks)."""

from __future__ import annotations

from .checked import array_files
from .group_store import Cycle, MemberError


def group_summary(group, members: list) -> dict:
    """group.yaml's `checked:`: the group's own files checked, and how many of its `members` (their stores,
    None for one that cannot be opened, True for one leading back to a group above) have every structure
    but their data tiles checked."""
    files = array_files(group)
    done = len(files) - len(group.checked.files_unchecked(files))
    whole = sum(1 for m in members if m is True or (m is not None and metadata_complete(m, {id(group)})))
    return {"group_files": f"{done} of {len(files)}", "members": f"{whole} of {len(members)} checked",
            "background": group.checked.background_state()}


def metadata_complete(store, seen: set) -> bool:
    """Whether every structure of `store` but its data tiles has been checked (a group: its files and each
    member's, recursively; a member leading back to a group above it counts as checked there)."""
    if id(store) in seen:
        return True
    seen = seen | {id(store)}
    if store.checked.files_unchecked(array_files(store)):
        return False
    if hasattr(store, "details_files"):
        for member in store.members():
            try:
                target = store.member_store(member.shown)
            except MemberError:
                continue
            if not isinstance(target, Cycle) and not metadata_complete(target, seen):
                return False
        return True
    if getattr(store, "legacy0x_layout", None) == "workspace":
        return all(metadata_complete(store.array(rel), seen) for rel in store.array_paths())
    return not store.checked.unchecked(store, store.fragment_paths(), tiles=False)
