"""Shared pytest fixtures for tdbfs.

Arrays (written for real by tiledb-py, see tests/arrays.py):
    array_factory(kind, name=None, **options) -> arrays.BuiltArray
        a fresh array in this test's tmp dir; kinds: arrays.KINDS
    sample_arrays -> dict[str, arrays.BuiltArray]
        session-wide representative set (arrays.SAMPLE_SET); read-only: do not write
    sample_array(name) -> arrays.BuiltArray       one of them, by name

Mounts (tests/mounting.py):
    mount(array_path, **kw) -> pathlib.Path
        mounts with `python -m tdbfs.cli mount ARRAY MNT`; every mount made through
        it is unmounted at teardown, whatever happened
    mounted(...)  context manager (import it from mounting)

Snapshots:
    snapshot(path) -> dict     every file's path, size, mtime, mode, sha256
    assert_unchanged(before, after)

Reference reads (tests/reference.py): fragment_cells, fragment_info, ...
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import arrays  # noqa: E402
import mounting  # noqa: E402
from mounting import assert_unchanged, mounted, snapshot_tree, unmount  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _digests_in_this_process():
    """A test renders summaries in this process unless it asks for workers: `tdbfs cat` run in-process
    (cli.main) turns them on for the rest of the process, as it does in its own."""
    from tdbfs.store import digest_pool
    digest_pool.enable(1)
    yield
    digest_pool.enable(1)


@pytest.fixture
def array_factory(tmp_path: Path):
    """Build arrays in this test's tmp dir: array_factory("sparse", ndim=3, capacity=2)."""
    base = tmp_path / "arrays"

    def make(kind: str, name: str | None = None, **options):
        return arrays.make_array(base, kind, name=name, **options)

    return make


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on loopback (tests/s3_server.py) for one module's tests; a module needing its
    environment or another kind of server defines its own."""
    from s3_server import S3Server

    server = S3Server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sample_arrays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, arrays.BuiltArray]:
    """The representative set of arrays (arrays.SAMPLE_SET), built once per session.
    Shared by every test: never write to them."""
    return arrays.build_sample_set(tmp_path_factory.mktemp("sample_arrays"))


@pytest.fixture(scope="session")
def sample_array(sample_arrays):
    def get(name: str) -> arrays.BuiltArray:
        return sample_arrays[name]

    return get


@pytest.fixture
def tiles_decoded(monkeypatch) -> list:
    """Every data tile the store decodes from now on (the real decoder, each call recorded)."""
    import tdbfs.store.fragment as fragment_module

    seen = []
    real = fragment_module.unfilter_tile

    def counted(raw, file, *args, **kwargs):
        seen.append(file)
        return real(raw, file, *args, **kwargs)

    monkeypatch.setattr(fragment_module, "unfilter_tile", counted)
    return seen


@pytest.fixture
def mount():
    """mount(array_path, **mounted_kwargs) -> mount point; all unmounted at teardown."""
    stack = contextlib.ExitStack()

    def do_mount(array_path, **kw) -> Path:
        return stack.enter_context(mounted(array_path, **kw))

    with stack:
        yield do_mount


@pytest.fixture
def snapshot():
    return snapshot_tree


def pytest_runtest_setup(item):
    """Tests marked `backcompat` read the back-compat corpus (tests/corpus.py): skipped, saying why,
    only where it is missing (it ships in tests/data/backcompat_arrays)."""
    if item.get_closest_marker("backcompat") is not None:
        import corpus

        corpus.require()
