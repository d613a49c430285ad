"""docs/library.md's examples run: every ```python block, in order, in one namespace, in a folder of
its own (blocks marked `python no-run` need an object store and are left out)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("tiledb")
fsspec = pytest.importorskip("fsspec")
pytest.importorskip("pandas")

DOC = Path(__file__).resolve().parents[2] / "docs" / "library.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def test_the_documented_examples_run(tmp_path, monkeypatch):
    code = blocks()
    assert len(code) >= 10
    fsspec.register_implementation("tdbfs", "tdbfs.library.filesystem.TdbfsFileSystem", clobber=True)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "library_md"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(code):
            try:
                exec(compile(block, f"docs/library.md block {i + 1}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"docs/library.md block {i + 1} failed: {exc!r}\n{block}") from exc
    printed = out.getvalue()
    assert "<tdbfs.Array '" in printed and ": clean (" in printed and "nothing at " in printed
