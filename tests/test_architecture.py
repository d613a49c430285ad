"""The packages keep the architecture of the developers' guide, read from the source (ast: nothing of
tdbfs is imported, so a module that fails to import is still walked):

* only `tdbfs/mount/` imports FUSE (mfusepy, fusepy, llfuse, pyfuse3) or ctypes;
* data flows one way, format < store < reader < views < the front ends: what they share (frontend),
  then the mount, the check and the library, then the command line over them. No module imports one
  of a higher layer, whether at its top or inside a function;
* no circle of imports between modules, counting those inside functions (each still ties the two
  modules together: neither can be understood, moved or tested without the other);
* no module over 600 lines.

The walker itself is tested on planted violations, so that a rule that can no longer fail is noticed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tdbfs"
MAX_LINES = 600
FUSE_MODULES = {"mfusepy", "fuse", "fusepy", "llfuse", "pyfuse3", "ctypes"}
FUSE_ROOM = "mount"

#: the layer of each room of tdbfs/ (its first folder, or a module at the top). A module imports only
#: its own layer's or lower ones: the mount, the check and the library never the command line, and
#: the package's face (tdbfs/__init__.py, the library's) may import any of them.
LAYERS = {
    "problem": 0, "lazy": 0, "text": 0, "location": 0, "errors": 0,
    "format": 1,
    "store": 2,
    "reader": 3,
    "views": 4,
    "frontend": 5,
    "mount": 6, "check": 6, "library": 6, "salvaging": 6,
    "cli": 7, "__main__": 7, "__init__": 7,
}


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under `package` (a package is its __init__.py)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported name, line) of every import statement of the module, anywhere in it; names inside
    the package resolved to the module they load (`from .x import y`: module x.y if it is one, else x)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.append((target if target in known else base, node.lineno))
    return out


def module_of(target: str, known: dict[str, Path]) -> str | None:
    """The module of the package that an imported name loads, or None for one outside it."""
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in known else None


def room(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def violations(package: Path) -> list[str]:
    """Every breach of the rules above in the package at `package`, one line each."""
    known = modules(package)
    root = package.name
    out = []
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        rel = path.relative_to(package.parent)
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            out.append(f"{rel}: {lines} lines (at most {MAX_LINES})")
        layer = LAYERS.get(room(name))
        if layer is None:
            out.append(f"{rel}: the folder or module {room(name)!r} has no layer (add it to LAYERS)")
            continue
        for target, line in imports(name, path, known):
            if target.split(".")[0] in FUSE_MODULES and room(name) != FUSE_ROOM:
                out.append(f"{rel}:{line}: imports {target} outside {root}/{FUSE_ROOM}/")
            imported = module_of(target, known)
            # every module loads the package's own __init__ first: an edge to it says nothing
            if imported is None or imported == name or imported == root:
                continue
            graph[name].add(imported)
            theirs = LAYERS.get(room(imported))
            if theirs is not None and theirs > layer:
                out.append(f"{rel}:{line}: {room(name)} (layer {layer}) imports {imported} (layer {theirs})")
    for component in circles(graph):
        out.append("import circle: " + " <-> ".join(component))
    return out


def test_the_package_keeps_its_architecture():
    assert violations(PACKAGE) == []


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "tdbfs"
    for rel, text in {"__init__.py": "", "format/__init__.py": "", "store/__init__.py": "",
                      "views/__init__.py": "", "mount/__init__.py": "", **files}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    return package


def test_a_clean_planted_package_passes(tmp_path):
    package = _plant(tmp_path, {"format/a.py": "import os\n", "store/b.py": "from ..format import a\n",
                                "views/c.py": "from ..store.b import x\n",
                                "mount/d.py": "import ctypes\nimport mfusepy\nfrom ..views import c\n"})
    assert violations(package) == []


@pytest.mark.parametrize("files, expected", [
    ({"store/s.py": "def f():\n    import mfusepy\n"},
     ["tdbfs/store/s.py:2: imports mfusepy outside tdbfs/mount/"]),
    ({"views/v.py": "from ctypes import c_int\n"},
     ["tdbfs/views/v.py:1: imports ctypes outside tdbfs/mount/"]),
    ({"format/f.py": "def f():\n    from ..store import s\n", "store/s.py": ""},
     ["tdbfs/format/f.py:2: format (layer 1) imports tdbfs.store.s (layer 2)"]),
    ({"store/s.py": "from ..mount.m import x\n", "mount/m.py": ""},
     ["tdbfs/store/s.py:1: store (layer 2) imports tdbfs.mount.m (layer 6)"]),
    ({"mount/m.py": "from ..cli import c\n", "cli/__init__.py": "", "cli/c.py": ""},
     ["tdbfs/mount/m.py:1: mount (layer 6) imports tdbfs.cli.c (layer 7)"]),
    ({"store/a.py": "from . import b\n", "store/b.py": "def f():\n    from .a import g\n"},
     ["import circle: tdbfs.store.a <-> tdbfs.store.b"]),
    ({"views/big.py": "x = 1\n" * 601},
     ["tdbfs/views/big.py: 601 lines (at most 600)"]),
    ({"gadgets/g.py": ""},
     ["tdbfs/gadgets/g.py: the folder or module 'gadgets' has no layer (add it to LAYERS)"]),
])
def test_a_planted_violation_is_found(tmp_path, files, expected):
    assert violations(_plant(tmp_path, files)) == expected
