"""Helpers shared by the view modules: files rendered from store data, with errors recorded."""

from __future__ import annotations

import logging
from typing import Callable, Mapping

from .nodes import BytesFile, DirNode, DynamicDir, Node, ViewError
from .render import to_yaml

log = logging.getLogger("tdbfs.views")


def guarded(render: Callable[[], bytes], problems, file: str, structure: str) -> Callable[[], bytes]:
    """Wrap a renderer: any failure is recorded as a problem and raised as ViewError (EIO)."""

    def run() -> bytes:
        try:
            return render()
        except ViewError:
            raise
        except FileNotFoundError as exc:
            raise ViewError(f"{file}: vanished ({exc})") from None
        except Exception as exc:  # every decoding failure ends as a problem, never a crash
            problem = problems.add_error(exc, file, structure)
            log.warning("cannot build view of %s: %s", file, problem["message"])
            raise ViewError(f"{problem.get('file')}: {problem.get('structure')} at byte {problem.get('offset')}: "
                            f"{problem.get('message')}") from None

    return run


def yaml_file(make: Callable[[], object], problems, file: str, structure: str, immutable: bool = True,
              mtime: float = 0.0) -> BytesFile:
    return BytesFile(guarded(lambda: to_yaml(make()), problems, file, structure), immutable=immutable, mtime=mtime)


class LiveFile(BytesFile):
    """A file re-rendered at every stat (array-wide summaries that grow as problems are found)."""

    def size(self) -> int:
        self._data = self._render()
        return len(self._data)


class KeyedDir(DynamicDir):
    """A directory whose entries come and go; nodes of entries that stay are kept (and their caches)."""

    def __init__(self, names: Callable[[], list[str]], make: Callable[[str], Node], mtime=None):
        self._names = names
        self._make_node = make
        self._nodes: dict[str, Node] = {}
        super().__init__(self._children, mtime)

    def _children(self) -> Mapping[str, Node]:
        names = self._names()
        nodes = {}
        for name in names:
            node = self._nodes.get(name)
            if node is None:
                node = self._make_node(name)
            nodes[name] = node
        self._nodes = nodes
        return dict(nodes)


class CachedFile(BytesFile):
    """A rendered file whose bytes live in the store's bounded cache, not in the node.

    Used for per-tile text and YAML, which are many and may be large.
    """

    def __init__(self, cache, key, render: Callable[[], bytes], immutable: bool = True, mtime: float = 0.0):
        super().__init__(render, immutable=immutable, mtime=mtime)
        self._cache = cache
        self._key = key

    def data(self) -> bytes:
        return self._cache.get_or_make(self._key, lambda: _with_cost(self._render()))


def _with_cost(data: bytes):
    return data, len(data) + 64
