"""A TileDB group (its members, each opening to its own Array or Group) and a TileDB 0.x workspace
(its arrays)."""

from __future__ import annotations

import dataclasses

from ..errors import TdbfsError
from .base import StoreObject


class Group(StoreObject):
    """An opened TileDB group: `members` as a reader sees them now, its metadata, its findings."""

    kind = "group"

    @property
    def members(self) -> list["Member"]:
        """The members now, in the order of `members/` in the tree."""
        return [Member(self, m) for m in self.store.members()]

    def __getitem__(self, name: str):
        """The member `name` (its entry under members/), opened."""
        for m in self.members:
            if m.name == name:
                return m.open()
        raise KeyError(f"no member {name!r} in {self.uri}")

    @property
    def format_version(self) -> int | None:
        return self.store.format_version()

    @property
    def metadata(self) -> dict:
        """The group metadata: key -> value, every `__meta` file applied in time order."""
        return {k: r.value for k, r in self.store.merged_metadata().records.items() if not r.deleted}

    @property
    def problems(self) -> list:
        """What is wrong with the group's own files and listing (group.yaml's `problems`)."""
        from ..views.group_views import group_summary
        group_summary(self.store)
        return self.store.findings()

    def _repr_extra(self) -> str:
        try:
            return f" ({len(self.store.members())} members)"
        except Exception:  # noqa: BLE001 -- a repr never fails
            return ""


class Member:
    """One member of a group: name (its entry under members/), type ('array' or 'group'), uri (as stored),
    relative, location (resolved); `open()` gives its Array or Group."""

    def __init__(self, group: Group, member):
        self._group = group
        self._member = member

    @property
    def name(self) -> str:
        return self._member.shown

    @property
    def type(self) -> str:
        return self._member.member.type_name

    @property
    def uri(self) -> str:
        return self._member.member.uri

    @property
    def relative(self) -> bool:
        return bool(self._member.member.relative)

    @property
    def location(self) -> str:
        return self._group.store.location(self._member.member)

    def open(self):
        """The member's own object (sharing the group's cache). A member that is missing, unreadable or a
        group shown above it raises TdbfsError with its problem's words."""
        from ..store.group_store import Cycle, GroupStore

        store = self._group.store.member_store(self.name)
        if isinstance(store, Cycle):
            raise TdbfsError(f"member {self.name!r} is the group {store.location}, which holds it: a cycle")
        opened = dataclasses.replace(self._group._opened, location=self.location)
        if getattr(store, "legacy0x_layout", None) == "workspace":
            return Workspace(store, opened)
        if isinstance(store, GroupStore):
            return Group(store, opened)
        from .array import Array
        return Array(store, opened)

    def __repr__(self) -> str:
        return f"<tdbfs.Member {self.name!r} {self.type} at {self.location!r}>"


class Workspace(StoreObject):
    """A TileDB 0.x workspace or group (GenomicsDB): its arrays, each an Array."""

    kind = "workspace"

    @property
    def arrays(self) -> dict:
        """Each array's path in the workspace -> its Array (shown under arrays/<name>/ in the tree)."""
        from .array import Array

        out = {}
        for rel in self.store.array_paths():
            opened = dataclasses.replace(self._opened, location=self.store.storage.describe(rel))
            out[rel] = Array(self.store.array(rel), opened)
        return out

    @property
    def problems(self) -> list:
        return self.store.findings()

    def _repr_extra(self) -> str:
        try:
            return f" ({len(self.store.array_paths())} arrays)"
        except Exception:  # noqa: BLE001 -- a repr never fails
            return ""
