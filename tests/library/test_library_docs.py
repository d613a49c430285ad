"""docs/library.md's examples run: every ```python block, in order, in one namespace, in a fresh
interpreter working in a folder of its own (tiledb-py resolves relative paths against the folder its
first context saw). Blocks marked `python no-run` need an object store and are left out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tiledb")
pytest.importorskip("fsspec")
pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "library.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

RUNNER = """
import sys, fsspec
# as the installed entry point registers it, whatever the install the test runs in
fsspec.register_implementation("tdbfs", "tdbfs.library.filesystem.TdbfsFileSystem", clobber=True)
namespace = {"__name__": "library_md"}
for i, block in enumerate(BLOCKS):
    try:
        exec(compile(block, f"docs/library.md block {i + 1}", "exec"), namespace)
    except BaseException as exc:
        sys.exit(f"docs/library.md block {i + 1} failed: {exc!r}\\n{block}")
"""


def test_the_documented_examples_run(tmp_path):
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 10
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-c", f"BLOCKS = {blocks!r}\n" + RUNNER], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"<tdbfs.Array '{tmp_path}/example_array' (1 fragments)>" in res.stdout
    assert f"{tmp_path}/example_array: clean (1 fragments, " in res.stdout
    assert f"nothing at {tmp_path}/no_such_array" in res.stdout
    assert (tmp_path / "example_array" / "__schema").is_dir() and (tmp_path / "example_group").is_dir()
