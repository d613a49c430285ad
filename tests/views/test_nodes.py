"""The node layer on its own: the one path resolver (`walk`) and the keep policies of BytesFile."""

from __future__ import annotations

import pytest

from tdbfs.store.cache import ByteLRU
from tdbfs.views.nodes import (FOREVER, LIVE, PER_OPEN, BytesFile, FolderUnreadable, InCache, LinkLoop, NoSuchPath,
                               NotAFolder, StaticDir, SymlinkNode, ViewError, WhileState, kept, resolve, walk)


def _broken():
    raise ViewError("cannot list")


def toy():
    leaf = BytesFile(lambda: b"leaf\n", FOREVER)
    deep = StaticDir(lambda: {"leaf.txt": leaf, "up": SymlinkNode("../b.bin")})
    sub = StaticDir(lambda: {"deep": deep, "b.bin": BytesFile(lambda: b"b")})
    return StaticDir(lambda: {
        "sub": sub,
        "current": SymlinkNode("sub/deep"),
        "abs": SymlinkNode("/sub/b.bin"),
        "loop": SymlinkNode("loop"),
        "broken": StaticDir(_broken),
    }), leaf


def test_walk_finds_nodes_and_canonical_paths():
    root, leaf = toy()
    assert walk(root, "sub/deep/leaf.txt") == (leaf, "sub/deep/leaf.txt")
    assert walk(root, "/sub//deep/./leaf.txt/") == (leaf, "sub/deep/leaf.txt")
    assert walk(root, "") == (root, "")
    assert resolve(root, "sub/deep/leaf.txt") is leaf


def test_walk_leaves_links_and_dotdot_alone_unless_asked():
    root, leaf = toy()
    node, where = walk(root, "current")
    assert isinstance(node, SymlinkNode) and where == "current"
    with pytest.raises(NotAFolder) as info:   # a symlink is not a folder to FUSE: the kernel follows it
        walk(root, "current/leaf.txt")
    assert info.value.path == "current"
    with pytest.raises(NoSuchPath):
        walk(root, "sub/..")


def test_walk_follows_links_and_dotdot_like_a_shell():
    root, leaf = toy()
    assert walk(root, "current/leaf.txt", follow_links=True) == (leaf, "sub/deep/leaf.txt")
    node, where = walk(root, "current/up", follow_links=True)
    assert where == "sub/b.bin" and node.read(0, 10) == b"b"
    assert walk(root, "abs", follow_links=True)[1] == "sub/b.bin"
    assert walk(root, "sub/deep/../../sub/deep/leaf.txt", follow_links=True) == (leaf, "sub/deep/leaf.txt")
    assert walk(root, "../../sub", follow_links=True)[1] == "sub"   # no way above the root
    node, where = walk(root, "current", follow_links=True, follow_last=False)
    assert isinstance(node, SymlinkNode) and where == "current"


def test_walk_errors_say_where():
    root, _ = toy()
    with pytest.raises(NoSuchPath) as info:
        walk(root, "sub/nope/x")
    assert info.value.path == "sub/nope/x" and isinstance(info.value, KeyError)
    with pytest.raises(NotAFolder) as info:
        walk(root, "sub/b.bin/x")
    assert info.value.path == "sub/b.bin"
    with pytest.raises(LinkLoop):
        walk(root, "loop", follow_links=True)
    with pytest.raises(FolderUnreadable) as info:
        walk(root, "broken/x")
    assert info.value.path == "broken" and str(info.value) == "cannot list" and isinstance(info.value, ViewError)


def test_walk_asks_the_given_child_finder():
    root, leaf = toy()
    asked = []

    def child(folder, name, where):
        asked.append((name, where))
        return folder.child(name)

    assert walk(root, "sub/deep/leaf.txt", child=child)[0] is leaf
    assert asked == [("sub", ""), ("deep", "sub"), ("leaf.txt", "sub/deep")]


class Counter:
    def __init__(self, outputs=None):
        self.n = 0
        self.outputs = outputs

    def __call__(self) -> bytes:
        self.n += 1
        if self.outputs:
            return self.outputs[min(self.n, len(self.outputs)) - 1]
        return b"render %d\n" % self.n


def test_forever_renders_once_and_is_immutable():
    render = Counter()
    f = BytesFile(render, FOREVER, mtime=12.5)
    assert f.immutable and f.mtime() == 12.5
    assert f.read(0, 100) == b"render 1\n" and f.fresh() == b"render 1\n" and f.size() == 9
    assert render.n == 1


def test_per_open_renders_again_at_each_fresh_only():
    render = Counter()
    f = BytesFile(render, PER_OPEN, mtime=lambda: 3.0)
    assert not f.immutable and f.mtime() == 3.0
    assert f.size() == 9 and f.read(0, 100) == b"render 1\n"
    assert f.fresh() == b"render 2\n" and f.read(0, 100) == b"render 2\n"
    assert render.n == 2
    assert kept(True) is FOREVER and kept(False) is PER_OPEN


def test_live_renders_at_every_stat_until_two_renderings_agree():
    render = Counter([b"a\n", b"ab\n", b"abc\n", b"abc\n"])
    f = BytesFile(render, LIVE)
    assert f.size() == 4          # a, ab, abc, abc: stable at the fourth
    assert f.read(0, 10) == b"abc\n" and render.n == 4
    assert f.size() == 4 and render.n == 6


def test_while_state_renders_again_only_when_the_state_changes():
    render, state = Counter(), {"v": 1}
    f = BytesFile(render, WhileState(lambda: state["v"]))
    assert f.read(0, 100) == b"render 1\n" and f.fresh() == b"render 1\n"
    state["v"] = 2
    assert f.read(0, 100) == b"render 2\n" and render.n == 2
    state["v"] = None             # unknown: rendered at every access
    f.size()
    f.size()
    assert render.n == 4


def test_in_cache_keeps_the_bytes_in_the_store_cache():
    cache = ByteLRU(1 << 20)
    render = Counter()
    f = BytesFile(render, InCache(cache, ("k", 1), immutable=True))
    g = BytesFile(render, InCache(cache, ("k", 1), immutable=True))
    assert f.immutable and f.read(0, 100) == b"render 1\n" and g.read(0, 100) == b"render 1\n"
    assert render.n == 1 and cache.get(("k", 1)) == b"render 1\n"
    version = {"v": 1}
    h = BytesFile(render, InCache(cache, lambda: ("file", version["v"]), immutable=False))
    assert h.read(0, 100) == b"render 2\n" and h.read(0, 100) == b"render 2\n"
    version["v"] = 2              # the file behind the view changed: its view is rendered again
    assert h.read(0, 100) == b"render 3\n" and not h.immutable
