"""Helpers shared by the view modules: files rendered from store data, with errors recorded."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable, Iterable, Mapping, Sequence

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


def guarded_children(make, frag):
    """Wrap the maker of a fragment's folder listing: a failure is recorded as the fragment's problem
    and raised as ViewError (EIO)."""
    def run():
        try:
            return make()
        except ViewError:
            raise
        except FileNotFoundError as exc:
            raise ViewError(str(exc)) from None
        except Exception as exc:
            problem = frag.problems.add_error(exc, frag.rel, "fragment metadata")
            raise ViewError(problem.message) from None
    return run


def yaml_file(make: Callable[[], object], problems, file: str, structure: str, keep: Keep = FOREVER,
              mtime: float = 0.0) -> BytesFile:
    return BytesFile(guarded(lambda: to_yaml(make()), problems, file, structure), keep, mtime=mtime)


class LazyNodes(Mapping):
    """A folder listing whose nodes are made on first access; `entries()` gives the names and their
    st_mode without making any node (a readdir of 100,000 fragments or 10,000 commit files), and
    `prepared` keeps what a front end makes of them once per listing. `names` (a list, or a sized
    iterable of them) may be what the store shares: it is only read."""

    def __init__(self, names: Iterable[str], get: Callable[[str], Node], mode, listed=None):
        self._names, self._get, self._mode, self._listed = names, get, mode, listed
        self._set = self._prepared = None

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

    def entries(self):
        """(names, st_mode of all or a function of the name, the names as the store's listings had them
        or None), without making any node."""
        listed = self._listed(self._names) if self._listed is not None else None
        return self._names, self._mode, listed

    def prepared(self, make: Callable[[LazyNodes], object]):
        """`make(self)`, made once per listing: a folder listed again while unchanged (`per_listing`)
        gives the same LazyNodes, and what a front end made of it (the mount: names as libfuse takes
        them) is not made again."""
        if self._prepared is None:
            self._prepared = make(self)
        return self._prepared


class KeyedDir(DynamicDir):
    """A directory whose entries come and go; nodes of entries that stay are kept (and their caches).

    With `exists(name)` (which must agree with `names()`), one entry is found without listing all.
    With `mode`, a listing makes no node, and while `names()` returns the very same object (a listing the
    store keeps: a list, or a sized iterable of the names) the same `LazyNodes` serves, with what it
    prepared; `listed(names)` may give those names as the store's listings had them (else None).
    """

    def __init__(self, names: Callable[[], Iterable[str]], make: Callable[[str], Node], mtime=None,
                 exists: Callable[[str], bool] | None = None, mode: int | None = None, keep: int | None = None,
                 listed: Callable[[Iterable[str]], Sequence | None] | None = None,
                 gone: Callable[[str], bool] | None = None):
        self._names = names
        self._make_node = make
        self._nodes: OrderedDict[str, Node] = OrderedDict()  # least recently used first
        self._keep = keep  # with `mode`: at most this many nodes kept (each may hold a rendered subtree)
        self._exists = exists
        self._gone = gone
        # st_mode of every entry (or a function of its name): a listing then makes no node
        self._mode = mode
        self._listed_by_store = listed
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

    def has(self, name: str) -> bool:
        """Whether the entry `name`, found before, is still there (with `gone`, cheaply: `gone(name)` tells
        it vanished; else as `exists` or the listing says)."""
        if self._gone is not None:
            return not self._gone(name)
        return self._exists(name) if self._exists is not None else name in self.children()

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
                listed = self._listed = LazyNodes(names, self._node, self._mode, self._listed_by_store)
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
