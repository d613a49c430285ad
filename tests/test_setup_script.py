"""scripts/_setup.sh: `tdbfs_setup demo` installs only what scripts/demo runs, `tdbfs_setup test`
everything, and the installers' output is shown only when one fails. Run in real bash, with each
installing step replaced by a function that says it ran (nothing is installed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "scripts" / "_setup.sh"
STEPS = ("_tdbfs_system_packages", "_tdbfs_azurite", "_tdbfs_chromium", "_tdbfs_zsh", "_tdbfs_dev_fuse",
         "_tdbfs_venv", "_tdbfs_genomicsdb")


def run_setup(program: str, tmp_path: Path):
    stubs = "\n".join(f'{step}() {{ echo "{step} $*"; }}' for step in STEPS)
    script = (f'set -euo pipefail\n. "{SETUP}"\n{stubs}\n'
              f'TDBFS_PY=true TDBFS_VENV="{tmp_path}/venv" TMPDIR="{tmp_path}"\n{program}\n')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_demo_mode_installs_no_browser_emulator_or_test_extra(tmp_path):
    res = run_setup("tdbfs_setup demo", tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["_tdbfs_system_packages ", "_tdbfs_dev_fuse ", "_tdbfs_venv demo"]
    # the man page is linked where man finds it with the venv's bin/ on PATH
    assert (tmp_path / "venv/share/man/man1/tdbfs.1").resolve() == ROOT / "docs" / "tdbfs.1"
    assert list(tmp_path.glob("tdbfs-setup.*")) == []   # the log of a setup that went well is removed


def test_test_mode_installs_everything(tmp_path):
    res = run_setup("tdbfs_setup test", tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["_tdbfs_system_packages ", "_tdbfs_azurite ", "_tdbfs_chromium ",
                                       "_tdbfs_zsh ", "_tdbfs_dev_fuse ", "_tdbfs_venv test",
                                       "_tdbfs_genomicsdb "]
    res = run_setup("tdbfs_setup", tmp_path)   # scripts written before the modes: test
    assert res.stdout.splitlines()[-2:] == ["_tdbfs_venv test", "_tdbfs_genomicsdb "]
    res = run_setup("tdbfs_setup everything", tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == "[setup] error: tdbfs_setup test|demo, not 'everything'\n"


def test_installers_output_is_shown_only_when_they_fail(tmp_path):
    program = '''TDBFS_SETUP_LOG="$TMPDIR/log"
_tdbfs_quiet sh -c 'echo noise; echo more noise >&2'
echo "after success: $(cat "$TDBFS_SETUP_LOG" | wc -l) lines logged"
_tdbfs_quiet sh -c 'echo the reason it failed >&2; exit 3' || { echo "rc $?"; _tdbfs_show_log; }'''
    res = run_setup(program, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["after success: 2 lines logged", "rc 3"]
    assert res.stderr.splitlines() == [f"[setup] what the installers printed ({tmp_path}/log):", "noise",
                                       "more noise", "the reason it failed"]
