"""`tdbfs completion bash|zsh`: the scripts parse, and complete commands, options, option values and
paths, run in the real shells (bash with COMP_WORDS set and the completion function called; zsh with
its completion builtins replaced by functions that print what they are given)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tdbfs.cli.completion import BACKEND_OPTIONS, MOUNT_OPTIONS, script
from tdbfs.cli.parser import build_parser
from tdbfs.cli.parser_info import commands

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
COMMANDS = {"mount", "umount", "unmount", "ls", "cat", "tree", "check", "completion",
            "export"}
COMMANDS |= {"salvage"}


def _tdbfs(*args):
    return subprocess.run([sys.executable, "-m", "tdbfs", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=60)


@pytest.fixture(scope="module")
def bash_file(tmp_path_factory):
    res = _tdbfs("completion", "bash")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    path = tmp_path_factory.mktemp("completion") / "tdbfs.bash"
    path.write_text(res.stdout)
    return path


@pytest.fixture(scope="module")
def zsh_file(tmp_path_factory):
    res = _tdbfs("completion", "zsh")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    path = tmp_path_factory.mktemp("completion") / "_tdbfs"
    path.write_text(res.stdout)
    return path


def complete_bash(bash_file, *words, cwd=None, command="tdbfs"):
    """COMPREPLY of the completion function for the command line `words`, the last being the word
    under the cursor."""
    program = (f'source "{bash_file}"\n'
               'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()\n'
               '_tdbfs\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    res = subprocess.run(["bash", "--norc", "-c", program, "bash", command, *words], capture_output=True,
                         text=True, cwd=cwd, env=ENV, timeout=60)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return [line for line in res.stdout.split("\n") if line]


def test_the_command_prints_the_script_made_from_the_parser():
    parser = build_parser()
    assert {name for c in commands(parser) for name in (c.name,) + c.aliases} == COMMANDS
    assert _tdbfs("completion", "bash").stdout == script("bash", parser)
    assert _tdbfs("completion", "zsh").stdout == script("zsh", parser)
    res = _tdbfs("completion", "fish")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("tdbfs: error: argument SHELL: invalid choice: 'fish'"), res.stderr


def test_bash_script_parses(bash_file):
    res = subprocess.run(["bash", "-n", str(bash_file)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "complete -F _tdbfs tdbfs" in bash_file.read_text()


def test_bash_completes_commands_and_options(bash_file):
    assert set(complete_bash(bash_file, "")) == COMMANDS
    assert complete_bash(bash_file, "ch") == ["check"]
    assert complete_bash(bash_file, "--v") == ["--version"]
    assert set(complete_bash(bash_file, "mount", "--")) == {"--help", "--foreground", "--cache-mb", "--jobs",
                                                             "--log", "--debug", "--key-file", "--cache-dir"}
    assert complete_bash(bash_file, "check", "--j") == ["--json", "--jobs"]
    assert complete_bash(bash_file, "completion", "") == ["bash", "zsh"]


def test_bash_completes_mount_options_after_the_last_comma(bash_file):
    assert complete_bash(bash_file, "mount", "-o", "allow_other,att") == ["allow_other,attr_timeout="]
    assert set(complete_bash(bash_file, "mount", "-o", "")) == set(MOUNT_OPTIONS + BACKEND_OPTIONS)
    # ls, cat, tree and check take backend options only
    assert set(complete_bash(bash_file, "ls", "-o", "")) == set(BACKEND_OPTIONS)
    assert complete_bash(bash_file, "check", "-o", "s3.endpoint_url=http://x:9000,s3.an") == \
        ["s3.endpoint_url=http://x:9000,s3.anon="]


def test_bash_completes_folders_for_arrays_and_files_for_files(bash_file, tmp_path):
    (tmp_path / "arr_folder").mkdir()
    (tmp_path / "arr_file.txt").write_text("x")
    # ARRAY and MNT: folders only, whichever options come before them
    assert complete_bash(bash_file, "mount", "arr", cwd=tmp_path) == ["arr_folder"]
    assert complete_bash(bash_file, "mount", "-o", "threads", "--cache-mb", "64", "arr_folder", "arr",
                         cwd=tmp_path) == ["arr_folder"]
    assert complete_bash(bash_file, "check", "--json", "arr", cwd=tmp_path) == ["arr_folder"]
    # FILE: files too
    assert sorted(complete_bash(bash_file, "mount", "--key-file", "arr", cwd=tmp_path)) == \
        ["arr_file.txt", "arr_folder"]
    # a third positional of mount completes to nothing
    assert complete_bash(bash_file, "mount", "arr_folder", "arr_folder", "arr", cwd=tmp_path) == []


def test_bash_completes_export(bash_file, tmp_path):
    (tmp_path / "arr_folder").mkdir()
    (tmp_path / "arr_out.csv").write_text("x")
    assert set(complete_bash(bash_file, "export", "--")) == {
        "--help", "--as-of", "--subarray", "--fragment", "--force", "--debug", "--key-file", "--cache-dir"}
    # ARRAY: folders; OUT: files too
    assert complete_bash(bash_file, "export", "arr", cwd=tmp_path) == ["arr_folder"]
    assert sorted(complete_bash(bash_file, "export", "--as-of", "5", "arr_folder", "arr", cwd=tmp_path)) == \
        ["arr_folder", "arr_out.csv"]
    # T, RANGES and NAME: typed, nothing offered
    assert complete_bash(bash_file, "export", "--subarray", "arr", cwd=tmp_path) == []
    assert set(complete_bash(bash_file, "export", "-o", "")) == set(BACKEND_OPTIONS)


def test_bash_completes_salvage_options_and_folders(bash_file, tmp_path):
    (tmp_path / "arr_folder").mkdir()
    (tmp_path / "arr_file.txt").write_text("x")
    assert complete_bash(bash_file, "sa") == ["salvage"]
    assert complete_bash(bash_file, "salvage", "--a") == ["--as-of"]
    # SRC and DEST: folders; after them, nothing
    assert complete_bash(bash_file, "salvage", "arr", cwd=tmp_path) == ["arr_folder"]
    assert complete_bash(bash_file, "salvage", "--as-of", "5", "arr_folder", "arr", cwd=tmp_path) == ["arr_folder"]
    assert complete_bash(bash_file, "salvage", "arr_folder", "arr_folder", "arr", cwd=tmp_path) == []


def test_bash_completes_paths_of_the_tree(bash_file, array_factory, tmp_path):
    array = array_factory("sparse").path
    wrapper = tmp_path / "tdbfs"   # the command as typed: the completion runs `tdbfs ls` through it
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tdbfs "$@"\n')
    wrapper.chmod(0o755)
    top = complete_bash(bash_file, "ls", str(array), "", command=str(wrapper))
    assert {"array.yaml", "fragments/", "schema/", "timeline.csv", "as_of/"} <= set(top)
    fragments = complete_bash(bash_file, "cat", str(array), "fragments/", command=str(wrapper))
    listed = _tdbfs("ls", str(array), "fragments").stdout.split()
    assert fragments == [f"fragments/{name}" for name in listed] and fragments
    assert complete_bash(bash_file, "cat", str(array), "sch", command=str(wrapper)) == ["schema/"]
    # not for a URL: a Tab never waits on the network
    assert complete_bash(bash_file, "ls", "s3://bucket/array", "", command=str(wrapper)) == []


def _zsh(zsh_file, program):
    zsh = shutil.which("zsh")
    assert zsh, "zsh is not installed (scripts/test installs it: apt-get install zsh)"
    res = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True, env=ENV, timeout=60)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return res.stdout.splitlines()


def test_zsh_script_parses(zsh_file):
    zsh = shutil.which("zsh")
    assert zsh, "zsh is not installed (scripts/test installs it: apt-get install zsh)"
    res = subprocess.run([zsh, "-n", str(zsh_file)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert zsh_file.read_text().startswith("#compdef tdbfs\n")


# zsh's completion system needs a line editor; these stand-ins for its functions print what the script
# hands them: the first _arguments call leaves the state the test names, the next prints its specs
_ZSH_STUBS = '''
compdef() { print -r -- "compdef $*"; }
_describe() { print -rl -- "${(@P)4}"; }
_values() { print -rl -- "$@"; }
_arguments() { if [[ -z $seen ]]; then seen=1; state=$STATE; return 0; fi; print -rl -- "$@"; }
'''


def test_zsh_offers_every_command_and_registers_itself(zsh_file):
    out = _zsh(zsh_file, f'{_ZSH_STUBS} source {zsh_file}; STATE=command; seen=; words=(tdbfs ""); _tdbfs')
    assert out[0] == "compdef _tdbfs tdbfs"
    offered = {line.split(":", 1)[0]: line.split(":", 1)[1] for line in out[1:]}
    assert set(offered) == COMMANDS
    assert offered["mount"] == "mount ARRAY's view at MNT (read-only)"


def test_zsh_completes_the_arguments_of_a_command(zsh_file):
    out = _zsh(zsh_file, f'{_ZSH_STUBS} source {zsh_file}; STATE=argument; seen=; words=(mount ""); _tdbfs')
    assert ":ARRAY:_files -/" in out and ":MNT:_files -/" in out
    assert "(-f --foreground)-f[stay in the foreground (the daemon itself)]" in out
    assert "*-o[mount options, comma separated (repeatable); check=metadata|full|of...]:OPT\\[,OPT\\]:_tdbfs_options_mount" in out
    assert "--log[daemon log file (default\\: stderr with -f, else none)]:FILE:_files" in out
    out = _zsh(zsh_file, f'{_ZSH_STUBS} source {zsh_file}; STATE=argument; seen=; words=(ls ""); _tdbfs')
    assert "::PATH:->tree" in out
    out = _zsh(zsh_file, f'{_ZSH_STUBS} source {zsh_file}; STATE=argument; seen=; words=(export ""); _tdbfs')
    assert ":ARRAY:_files -/" in out and ":OUT:_files" in out
    out = _zsh(zsh_file, f'{_ZSH_STUBS} source {zsh_file} >/dev/null; _tdbfs_options_mount')
    assert out[:2] == ["-s", ","]
    assert out[2:] == ["option"] + [w[:-1] + ":value: " if w.endswith("=") else w
                                    for w in MOUNT_OPTIONS + BACKEND_OPTIONS]
