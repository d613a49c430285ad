"""Helpers shared by the view modules: files rendered from store data, with errors recorded."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable, Iterable, Mapping, Sequence

from ..mount.joined_names import JoinedNames
from .nodes import FOREVER, BytesFile, DynamicDir, Keep, Node, ViewError
from .render import shown, to_yaml

log = logging.getLogger("tdbfs.views")


def guarded(render: Callable[[], bytes], problems, file: str, structure: str) -> Callable[[], bytes]:
    """Wrap a renderer: any failure is recorded as a problem and raised as ViewError (EIO)."""

    def run() -> bytes:
        try:
            return render()
        except ViewError:
            raise
        except FileNotFoundError as exc:
            # the folder listings' findings (store/findings.py) name what is missing
            raise ViewError(f"{shown(file)}: file missing ({shown(str(exc.filename or exc))})") from None
        except Exception as exc:  # every decoding failure ends as a problem, never a crash
            problem = problems.add_error(exc, file, structure)
            log.warning("cannot build view of %s: %s", shown(file), shown(problem.message))
            raise ViewError(f"{problem.file}: {problem.structure} at byte {problem.offset}: "
                            f"{problem.message}") from None

    return run


def yaml_file(make: Callable[[], object], problems, file: str, structure: str, keep: Keep = FOREVER,
              mtime: float = 0.0) -> BytesFile:
    return BytesFile(guarded(lambda: to_yaml(make()), problems, file, structure), keep, mtime=mtime)


class LazyNodes(Mapping):
    """A folder listing whose nodes are made on first access; `dirents()` gives the names encoded for
    libfuse and their st_mode, without making any node (a FUSE readdir of 100,000
    fragments or 10,000 commit files). `names` (a list, or a sized iterable of them) may be what the
    store shares: it is only read."""

    def __init__(self, names: Iterable[str], get: Callable[[str], Node], mode, encoded=None):
        self._names, self._get, self._mode, self._encoded = names, get, mode, encoded
        self._set = self._dirents = None

    def _members(self) -> frozenset:
        # built on the first lookup only: `ls` of 100,000 names never asks
        if self._set is None:
            self._set = frozenset(self._names)
        return self._set

    def __getitem__(self, name: str) -> Node:
        if name not in self._members():
            raise KeyError(name)
        return self._get(name)

    def __contains__(self, name) -> bool:
        return name in self._members()

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def dirents(self) -> tuple[Sequence[bytes], int | list[int]]:
        """(names as libfuse takes them, st_mode of all or of each), made once per listing: a folder
        listed again while unchanged (`per_listing`) costs no encoding."""
        if self._dirents is None:
            encoded = self._encoded(self._names) if self._encoded is not None else None
            if encoded is None:
                encoded = JoinedNames.encode(self._names)  # one encode for all (100,000 commit files)
            if encoded is None:
                encoded = [name.encode("utf-8", "surrogateescape") for name in self._names]
            mode = self._mode
            self._dirents = (encoded, [mode(name) for name in self._names] if callable(mode) else mode)
        return self._dirents


class KeyedDir(DynamicDir):
    """A directory whose entries come and go; nodes of entries that stay are kept (and their caches).

    With `exists(name)` (which must agree with `names()`), one entry is found without listing all.
    With `mode`, a listing makes no node, and while `names()` returns the very same object (a listing the
    store keeps: a list, or a sized iterable of the names) the same `LazyNodes` serves, with what it
    prepared; `encoded(names)` may give those names encoded as libfuse takes them (else None).
    """

    def __init__(self, names: Callable[[], Iterable[str]], make: Callable[[str], Node], mtime=None,
                 exists: Callable[[str], bool] | None = None, mode: int | None = None, keep: int | None = None,
                 encoded: Callable[[Iterable[str]], Sequence[bytes] | None] | None = None):
        self._names = names
        self._make_node = make
        self._nodes: OrderedDict[str, Node] = OrderedDict()  # least recently used first
        self._keep = keep  # with `mode`: at most this many nodes kept (each may hold a rendered subtree)
        self._exists = exists
        # st_mode of every entry (or a function of its name): a listing then makes no node
        self._mode = mode
        self._encoded = encoded
        self._listed: LazyNodes | None = None
        self.cheap_child = exists is not None
        super().__init__(self._children, mtime)

    def _node(self, name: str) -> Node:
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = self._make_node(name)
            if self._keep is not None and len(self._nodes) > self._keep:
                self._nodes.popitem(last=False)
        else:
            self._nodes.move_to_end(name)
        return node

    def child(self, name: str) -> Node | None:
        if self._exists is None:
            return super().child(name)
        if not self._exists(name):
            return None
        return self._node(name)

    def _children(self) -> Mapping[str, Node]:
        names = self._names()
        if self._mode is not None:
            listed = self._listed
            if listed is None or listed._names is not names:
                listed = self._listed = LazyNodes(names, self._node, self._mode, self._encoded)
            if self._nodes:
                self._nodes = OrderedDict((n, v) for n, v in self._nodes.items() if n in listed)
            return listed
        nodes = {}
        for name in names:
            node = self._nodes.get(name)
            if node is None:
                node = self._make_node(name)
            nodes[name] = node
        self._nodes = OrderedDict(nodes)
        return nodes
