"""The store of a TileDB group (docs/format.md §7.7): its own files (the marker, the group details
files of `__group/`, the metadata of `__meta/`), the member list a reader merges from the details
files, and each member opened, when first asked for, as a store of its own.

Members are found where TileDB finds them (`GroupDetails::member_by_name`): a relative URI is
joined to the group's own location, an absolute one is used as it is. A group written before
TileDB 2.9 has only the marker: its members are the arrays and groups in its folder.

A member whose location lies in the group's folder, however its URI is written (relative, an
absolute path or a `file://` URI, as tiledbsoma writes them), is read through the group's storage
(`Storage.child`), so no symlink inside the group is followed. A local member outside it (an
absolute path, or a relative URI whose '..' climbs out, which is a warning) is walked from the
deepest folder its path shares with the group's own path as the user named it, again through no
symlink; a URL is opened with `open_storage`, whatever backend it needs. Each member gives the
read/execute bits of its own location (`member_access`), which the mount shows its tree with.
A member that leads back to a group being shown above it (a cycle) is reported as such and never
opened again.
"""

from __future__ import annotations

import os
import posixpath
import threading
from dataclasses import dataclass

from ..errors import TdbfsError
from ..format.group import DETAILS_DIR, MARKER_FILE, STRUCTURE, GroupDetails, GroupMember
from .base_store import BaseStore
from .cache import ByteLRU
from .metadata_files import MetadataFiles
from .problems import WARNING, Problem, unique
from .storage import NotRegularError, Storage
from .storage.opening import open_storage

WITHIN = "group details payload"
#: object types of tiledb/sm/enums/object_type.h
GROUP_TYPE, ARRAY_TYPE = 1, 2
#: a member's version when no details file holds it: found in the folder of a group written before TileDB 2.9
FOUND_IN_FOLDER = 0


@dataclass(frozen=True)
class Member:
    """One member of the group as a reader sees it now."""

    shown: str               # its entry under members/: the name, else the URI's last part, made unique
    member: GroupMember      # as last written (version FOUND_IN_FOLDER: found in a marker-only group's folder)
    file: str | None         # the details file that added it; None for a member found in the folder


@dataclass(frozen=True)
class Place:
    """Where a member is: `location` as TileDB resolves it ('..' and '.' taken out); `inside`, its path
    from the group's folder when it lies in it ('' for the folder itself), else None; `leaves`, a
    relative URI that climbs out of the group's folder."""

    location: str
    inside: str | None
    leaves: bool = False


@dataclass(frozen=True)
class Cycle:
    """A member that is a group already shown above it: `depth` 0 is the group mounted."""

    depth: int
    location: str


class MemberError(TdbfsError):
    """A member that cannot be shown (missing, unreachable, of no known type); carries its problem."""

    def __init__(self, problem: Problem):
        super().__init__(problem.message)
        self.problem = problem


@dataclass(frozen=True)
class HistoryEntry:
    """One details file and what applying it changed."""

    file: str
    details: GroupDetails | None     # None when the file does not decode (its problem is recorded)
    added: tuple[GroupMember, ...] = ()      # members not there before (or there with another URI or type)
    removed: tuple[GroupMember, ...] = ()    # members there before and gone after
    kept: tuple[GroupMember, ...] = ()       # members listed again as they were (each write lists them all)


class GroupStore(MetadataFiles, BaseStore):
    def __init__(self, storage: Storage | str, cache_bytes: int = 512 << 20, cache: ByteLRU | None = None,
                 key=None, ancestors: tuple[str, ...] = (), drop_served: bool = True, *, opener):
        """`ancestors` are the locations (`location_key`) of the groups shown above this one; `opener`
        opens a member's storage as the group was (open_array.open_object)."""
        super().__init__(storage, cache_bytes, cache, drop_served)
        self._opener = opener
        self.key = key
        self.ancestors = ancestors + (location_key(self.storage),)
        self._opened: dict = {}      # shown name -> (what the member was, its store, Cycle or MemberError)
        self._open_lock = threading.Lock()

    # -- the group's own files ------------------------------------------------------------------
    def marker_size(self) -> int | None:
        e = self.entry(MARKER_FILE)
        return e.size if e is not None and e.is_file else None

    def details_files(self) -> list[str]:
        """Relative paths of the group details files, in the order readers apply them (timestamps)."""
        names = self.storage.regular_names(DETAILS_DIR)
        return [f"{DETAILS_DIR}/{n}" for n in sorted(names, key=_timestamp_order)]

    @staticmethod
    def details_path(name: str) -> str:
        return f"{DETAILS_DIR}/{name}"

    def group_details(self, rel: str) -> GroupDetails:
        from ..format.group import parse_group_details
        return self.parsed(STRUCTURE, rel, lambda data: parse_group_details(
            self.generic_tile(rel, 0, STRUCTURE).payload, rel, within=WITHIN))

    def history(self) -> list[HistoryEntry]:
        """Every details file in the order readers apply it, with what it changed."""
        return self._merged()[0]

    def _merged(self) -> tuple[list[HistoryEntry], dict[str, tuple[GroupMember, str]]]:
        """Every details file applied in timestamp order: (history, key -> (member, the file that added it)).
        A version 2 file adds and removes members by key; a version 1 file holds the whole list
        (`GroupDetailsV1::members_to_serialize`)."""
        current: dict[str, tuple[GroupMember, str]] = {}
        history = []
        for rel in self.details_files():
            details = self.attempt(lambda rel=rel: self.group_details(rel), rel, STRUCTURE)
            if details is None:
                history.append(HistoryEntry(rel, None))
                continue
            before = dict(current)
            if details.version == 1:
                current = {}
            for m in details.members:
                if m.deleted:
                    current.pop(m.key, None)
                elif m.key in before and _same(before[m.key][0], m):
                    current[m.key] = before[m.key]
                else:
                    current[m.key] = (m, rel)
            history.append(HistoryEntry(
                rel, details,
                added=tuple(m for k, (m, at) in current.items() if at == rel),
                removed=tuple(before[k][0] for k in before if k not in current),
                kept=tuple(current[m.key][0] for m in details.members
                           if not m.deleted and m.key in current and current[m.key][1] != rel)))
        return history, current

    def marker_only(self) -> bool:
        """A group written before TileDB 2.9: the marker and no `__group/`. Its members are the arrays and
        groups in its folder (what TileDB's `tiledb_object_ls` listed then); TileDB 2.9 on lists none."""
        return self.entry(DETAILS_DIR) is None and self.marker_size() is not None

    def _folder_members(self) -> list[tuple[str, GroupMember]]:
        """(name, member) of each real folder of a marker-only group holding an array or a group."""
        out = []
        for e in self.entries(""):
            if not e.is_dir or e.name.startswith("__"):
                continue
            kind = _object_type(self.storage, e.name)
            if kind is not None:
                out.append((e.name, GroupMember(FOUND_IN_FOLDER, kind, True, e.name, e.name, False, 0, 0, None)))
        return out

    def format_version(self) -> int | None:
        """The version of the latest details file that decodes."""
        versions = [h.details.version for h in self.history() if h.details is not None]
        return versions[-1] if versions else None

    # -- members ------------------------------------------------------------------------------
    def members(self) -> list[Member]:
        """The members now, by name."""
        if self.marker_only():
            return [Member(entry_name(name), m, None) for name, m in self._folder_members()]
        current = self._merged()[1]
        out = []
        taken: set[str] = set()
        for key in sorted(current):
            m, rel = current[key]
            shown = entry_name(m.name if m.name is not None else _last_part(m.uri))
            n = 2
            base = shown
            while shown in taken:
                shown = f"{base}~{n}"
                n += 1
            taken.add(shown)
            out.append(Member(shown, m, rel))
        return out

    def member(self, shown: str) -> Member | None:
        return next((m for m in self.members() if m.shown == shown), None)

    def location(self, m: GroupMember) -> str:
        """Where the member is, as a user would name it (TileDB's `member_by_name` URI, `file://` left out)."""
        if m.relative:
            return self.storage.describe(m.uri.strip("/"))
        return _strip_file_scheme(m.uri)

    def place(self, m: GroupMember) -> Place:
        """Where the member is, and whether that lies in the group's folder."""
        if m.relative:
            rel = posixpath.normpath(m.uri.strip("/") or ".")
            if rel == ".." or rel.startswith("../"):
                return Place(_joined(self.storage.uri, rel), None, True)
            return Place(self.storage.describe("" if rel == "." else rel), "" if rel == "." else rel)
        where = _strip_file_scheme(m.uri)
        if "://" not in where:
            where = posixpath.normpath(where)
        return Place(where, self._inside(where))

    def _inside(self, where: str) -> str | None:
        """`where`'s path from the group's folder, named as the user named it or as it really is; None
        when it lies elsewhere."""
        base = self.storage.uri.rstrip("/") or "/"
        roots = [base] if "://" in base else [base, os.path.realpath(base)]
        for root in roots:
            if where == root:
                return ""
            prefix = root if root.endswith("/") else root + "/"
            if where.startswith(prefix):
                return where[len(prefix):].strip("/")
        return None

    def member_problem(self, member: Member, message: str, severity: str = "error") -> Problem:
        if member.file is None:   # found in the folder: the folder is what the problem is about
            return Problem(member.member.uri, f"group member {member.shown!r}", None, message, severity)
        return Problem(member.file, f"group member {member.shown!r}", member.member.offset, message, severity,
                       within=WITHIN)

    def _member_storage(self, member: Member) -> Storage:
        """The storage of the member's folder; MemberError when there is none to read."""
        place = self.place(member.member)
        where = place.location
        if place.inside is not None:
            if place.inside:
                self._check_folder(member, where, lambda: self.storage.stat(place.inside))
            return self.storage.child(place.inside)
        if "://" not in where:
            from .storage.local import LocalStorage
            # what the user named is followed, as for the group itself; below it, no symlink
            where = os.path.abspath(where)
            named = getattr(self.storage, "named", "/")   # an object store's group: from the root
            storage = LocalStorage(where, os.path.commonpath([named, where]))
            self._check_folder(member, where, lambda: storage.stat(""))
            return storage
        try:
            return open_storage(where)
        except FileNotFoundError:
            raise MemberError(self.member_problem(member, f"{where}: member missing (nothing there)")) from None
        except NotADirectoryError:
            raise MemberError(self.member_problem(member, f"{where}: member is not a folder")) from None
        except Exception as exc:   # an unknown scheme, a backend not installed, credentials: shown, never fatal
            raise MemberError(self.member_problem(member, f"{where}: member cannot be opened: "
                                                          f"{type(exc).__name__}: {exc}")) from None

    def _check_folder(self, member: Member, where: str, stat) -> None:
        """MemberError unless `stat()` finds a real folder, reached through real folders."""
        try:
            entry = stat()
        except FileNotFoundError:
            raise MemberError(self.member_problem(member, f"{where}: member missing (no such folder)")) from None
        except NotRegularError as exc:
            to = f"; it points to {exc.target}" if exc.target is not None else ""
            raise MemberError(self.member_problem(
                member, f"{where}: a folder on the way to the member is a {exc.kind} (never followed{to})")) from None
        except OSError as exc:
            raise MemberError(self.member_problem(member, f"{where}: member unreadable: {exc}")) from None
        if not entry.is_dir:
            to = f"; it points to {entry.target}" if entry.target is not None else ""
            raise MemberError(self.member_problem(
                member, f"{where}: member is a {entry.kind}, not a folder (never followed{to})"))

    def member_access(self, shown: str):
        """(the member's store, the read/execute bits of its own folder as `Storage.access_mask` gives them:
        the folder and the reach of its ancestors), or (None, None) when there is no member store to show;
        bits None where its storage has no permissions of its own (an object store)."""
        try:
            target = self.member_store(shown)
        except (MemberError, KeyError):
            return None, None
        if isinstance(target, Cycle):
            return None, None
        try:
            return target, target.storage.access_mask()
        except OSError:
            return target, 0o500   # cannot tell who else may read it: only the mounting user

    def member_store(self, shown: str):
        """The store of the member `shown` (an array or a group store), a Cycle, or MemberError; opened
        once per member version, sharing this group's cache. Nothing is parsed here."""
        member = self.member(shown)
        if member is None:
            raise KeyError(shown)
        with self._open_lock:
            hit = self._opened.get(shown)
        if hit is not None and hit[0] == member.member:
            if isinstance(hit[1], MemberError):
                raise hit[1]
            return hit[1]
        try:
            value = self._open_member(member)
        except MemberError as exc:
            self.problems.add(exc.problem)
            value = exc
        with self._open_lock:
            self._opened[shown] = (member.member, value)
        if isinstance(value, MemberError):
            raise value
        return value

    def _open_member(self, member: Member):
        from .array_store import NotAnArrayError

        storage = self._member_storage(member)
        where = self.place(member.member).location
        loc = location_key(storage)
        if loc in self.ancestors:
            return Cycle(self.ancestors.index(loc), where)
        try:
            store = self._opener(storage, self.cache.capacity, key=self.key, cache=self.cache,
                                ancestors=self.ancestors)
        except NotAnArrayError as exc:
            raise MemberError(self.member_problem(member, f"{where}: neither a TileDB array nor a group "
                                                          f"({exc})")) from None
        except OSError as exc:
            raise MemberError(self.member_problem(member, f"{where}: member unreadable: {exc}")) from None
        stored = member.member.type_name
        found = "group" if isinstance(store, GroupStore) else "array"
        if stored != found:
            self.problems.add(self.member_problem(
                member, f"{where}: listed as {stored}, but the folder holds a TileDB {found}", WARNING))
        return store

    def member_prefix(self, member: Member) -> str:
        """The member's folder as problems of a whole group name it: relative to the group when inside it."""
        place = self.place(member.member)
        return place.inside if place.inside else place.location

    # -- problems -----------------------------------------------------------------------------
    def listing_findings(self) -> list[Problem]:
        """The marker; members listed but missing; folders present but not members; duplicate names."""
        out = []
        size = self.marker_size()
        if size is None:
            out.append(Problem(MARKER_FILE, "group marker", None,
                               "missing: TileDB does not open this folder as a group without it"))
        elif size:
            out.append(Problem(MARKER_FILE, "group marker", None,
                               f"{size} bytes: TileDB writes it empty and never reads it", WARNING))
        members = self.members()
        for member in members:
            try:
                self.member_store(member.shown)
            except MemberError as exc:
                out.append(exc.problem)
            if member.shown != entry_name(member.member.name if member.member.name is not None
                                          else _last_part(member.member.uri)):
                out.append(self.member_problem(member, f"duplicate name: shown as members/{member.shown}", WARNING))
        for h in self.history():
            if h.details is not None and h.details.trailing_bytes:
                out.append(Problem(h.file, STRUCTURE, h.details.end,
                                   f"{h.details.trailing_bytes} bytes after the last member (TileDB ignores them)",
                                   WARNING, within=WITHIN))
            seen: set[str] = set()
            for m in h.details.members if h.details is not None else ():
                if m.key in seen:
                    out.append(Problem(h.file, f"group member {m.key!r}", m.offset,
                                       "duplicate name: listed twice in one details file (TileDB keeps the last)",
                                       WARNING, within=WITHIN))
                seen.add(m.key)
        inside = set()
        for member in members:
            place = self.place(member.member)
            if place.inside:
                inside.add(place.inside.split("/")[0])
            if place.leaves:
                out.append(self.member_problem(
                    member, f"{place.location}: the relative URI {member.member.uri!r} climbs out of the group's "
                            "folder (TileDB follows it; shown with the permissions of its own folder)", WARNING))
        # A member removed from the group keeps its folder: TileDB's removal drops only the reference
        # (docs/format.md §7.7: a member written again with its deleted flag set), never the object,
        # and group.yaml's history names the removal. Such a folder is no stranger.
        inside |= {place.inside.split("/")[0] for h in self.history() for m in h.removed
                   for place in [self.place(m)] if place.inside}
        for e in self.entries(""):
            if e.is_dir and not e.name.startswith("__") and e.name not in inside:
                out.append(Problem(e.name, "group folder", None,
                                   "folder present but not a member of the group", WARNING))
        return out

    def findings(self) -> list[Problem]:
        return unique(self.listing_findings(), self.problems.items)

    def fragment_findings(self, frag) -> list[Problem]:
        return []


def _same(a: GroupMember, b: GroupMember) -> bool:
    return (a.uri, a.relative, a.object_type, a.name) == (b.uri, b.relative, b.object_type, b.name)


def location_key(storage: Storage) -> str:
    """Where a storage really is, so that two ways to one folder compare equal (cycles)."""
    uri = storage.uri
    if "://" in uri:
        return uri.rstrip("/")
    return os.path.realpath(uri)


def entry_name(name: str) -> str:
    """A member's name as one entry of members/: '%' and '/' escaped, '', '.' and '..' spelled out."""
    out = name.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    return out if out not in ("", ".", "..") else out.replace(".", "%2E") or "%"


def details_summary(details: GroupDetails) -> str:
    """One line for byte maps: the version and each member."""
    parts = []
    for m in details.members:
        what = f"{m.name!r}" if m.name is not None else "(no name)"
        how = "relative" if m.relative else "absolute"
        parts.append(f"{'removed ' if m.deleted else ''}{what} ({m.type_name}, {how} {m.uri!r})")
    return f"group details version {details.version}, {len(details.members)} members: " + ", ".join(parts)


def _object_type(storage: Storage, rel: str) -> int | None:
    """What the folder `rel` holds as TileDB tells it (`object_type`): an array (`__schema/`, or the
    `__array_schema.tdb` of format 9 and before), a group (its marker or `__group/`), else None."""
    if storage.entry(f"{rel}/__schema") is not None or storage.is_file(f"{rel}/__array_schema.tdb"):
        return ARRAY_TYPE
    if storage.entry(f"{rel}/{MARKER_FILE}") is not None or storage.entry(f"{rel}/{DETAILS_DIR}") is not None:
        return GROUP_TYPE
    return None


def _joined(base: str, rel: str) -> str:
    """`rel` joined to the folder `base`, '..' and '.' taken out as TileDB does (`URI::join_path`, then
    `purge_dots_from_path` for a local path), never above an object store's bucket."""
    scheme, sep, path = base.partition("://")
    if not sep:
        return posixpath.normpath(posixpath.join(base, rel))
    bucket, _, key = path.partition("/")
    return f"{scheme}://{bucket}{posixpath.normpath('/' + posixpath.join(key, rel))}"


def _strip_file_scheme(uri: str) -> str:
    if uri.startswith("file://"):
        from urllib.parse import unquote
        return unquote(uri[len("file://"):]) or "/"
    return uri


def _last_part(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def _timestamp_order(name: str):
    from ..format.names import try_parse_name
    n = try_parse_name(name)
    return (0, n.t1, n.t2, name) if n is not None else (1, 0, 0, name)
