"""Arrays in Google Cloud Storage (gs://) and Azure Blob Storage (az://, abfs://), through their emulators on
loopback (tests/object_emulators.py): the same code as s3://, behind gcsfs and adlfs.

Each array is written locally with tiledb-py and uploaded byte for byte; the mount of its URL must show
exactly the tree the mount of the same objects downloaded to a local folder shows, `tdbfs ls/cat/tree` must
print the same, and `tdbfs check` must find uploaded damage as it finds it on the local copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import arrays
from mounting import mounted, tdbfs_command, tree_contents
from object_emulators import EMULATORS, EmulatorMissing

#: kinds written locally and uploaded (tests/arrays.py)
KINDS = {
    "dense": dict(ndim=2),
    "sparse": dict(ndim=2),
    "var_strings": {},
    "consolidated": dict(vacuum_after=False),
}


@pytest.fixture(scope="module", params=sorted(EMULATORS))
def store(request, tmp_path_factory):
    """A started emulator with every kind of KINDS uploaded: (emulator, {kind: (url, local copy)})."""
    try:
        emulator = EMULATORS[request.param].start()
    except EmulatorMissing as exc:
        pytest.skip(f"the {request.param} emulator cannot run here: {exc}")
    try:
        base = tmp_path_factory.mktemp(f"{request.param}_arrays")
        uploaded = {}
        for kind, options in KINDS.items():
            built = arrays.make_array(base / "built", kind, **options)
            url = emulator.upload(built.path, kind)
            uploaded[kind] = (url, emulator.download(kind, base / "copies" / kind))
        yield emulator, uploaded
    finally:
        emulator.stop()


@pytest.fixture
def store_env(store, monkeypatch):
    emulator, _ = store
    for key, value in emulator.env.items():
        monkeypatch.setenv(key, value)
    return emulator


def run(args, timeout=180):
    return subprocess.run(tdbfs_command() + [str(a) for a in args], capture_output=True, text=True,
                          errors="surrogateescape", timeout=timeout, stdin=subprocess.DEVNULL)  # tiles are binary


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_mounted_tree_is_byte_identical_to_the_local_copy(store, store_env, kind):
    emulator, uploaded = store
    url, local = uploaded[kind]
    # the local mount checks nothing in the background either (an object store's default): the same `checked:`
    with mounted(url, extra_args=emulator.options) as remote_mnt, \
            mounted(local, extra_args=["-o", "check=off"]) as local_mnt:
        remote = tree_contents(remote_mnt, (url, str(local)))
        here = tree_contents(local_mnt)
        assert sorted(remote) == sorted(here)
        assert [k for k in here if remote[k] != here[k]] == []
        assert len(os.listdir(remote_mnt / "fragments")) >= 1
        assert f"uri: {url}\n".encode() in (remote_mnt / "array.yaml").read_bytes()
        with open("/proc/self/mountinfo") as f:
            assert any(url in line and str(remote_mnt) in line for line in f)


def test_ls_cat_tree_take_the_url(store, store_env):
    emulator, uploaded = store
    url, local = uploaded["sparse"]
    fragment = run(["ls", local, "fragments"]).stdout.split()[0].rstrip("/")
    for args, extra in ((["ls"], ["fragments"]), (["tree", "--depth", "3"], []),
                        (["cat"], [f"fragments/{fragment}/footer.yaml"]), (["cat"], ["schema/current.yaml"]),
                        (["cat"], [f"fragments/{fragment}/attrs/a0/tile_0.bin"])):
        remote = run([*args, *emulator.options, url, *extra])
        here = run([*args, local, *extra])
        assert remote.returncode == 0 == here.returncode, remote.stderr
        assert remote.stdout == here.stdout and remote.stdout
    long_remote = run(["ls", "-l", *emulator.options, url, f"fragments/{fragment}"]).stdout.splitlines()
    long_here = run(["ls", "-l", local, f"fragments/{fragment}"]).stdout.splitlines()
    # times differ (upload time against download time): modes, sizes and names must not
    assert [ln.split()[:2] + ln.split()[-1:] for ln in long_remote] == \
           [ln.split()[:2] + ln.split()[-1:] for ln in long_here]


def test_check_finds_uploaded_damage_as_on_local_disk(store, store_env, tmp_path):
    emulator, uploaded = store
    _, pristine = uploaded["sparse"]
    damaged = shutil.copytree(pristine, tmp_path / "damaged")
    fragment = sorted((damaged / "__fragments").iterdir())[0]
    tile_file = fragment / "a0.tdb"
    data = bytearray(tile_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tile_file.write_bytes(bytes(data))
    metadata = fragment / "__fragment_metadata.tdb"
    metadata.write_bytes(metadata.read_bytes()[:-5])   # the footer's length field cut off
    (damaged / "__fragments" / "stray.txt").write_bytes(b"not TileDB's")
    url = emulator.upload(damaged, f"damaged-{tmp_path.name}")
    remote = run(["check", "--json", *emulator.options, url])
    here = run(["check", "--json", damaged])
    assert remote.returncode == 1 == here.returncode, remote.stderr
    assert json.loads(remote.stdout.replace(url, str(damaged))) == json.loads(here.stdout)
    found = {p["file"].rpartition("/")[2] for p in json.loads(here.stdout)["problems"]}
    assert {"stray.txt", "__fragment_metadata.tdb"} <= found
    clean_url, _ = uploaded["dense"]
    clean = run(["check", *emulator.options, clean_url])
    assert clean.returncode == 0, clean.stdout + clean.stderr


#: the other scheme each store answers to: gcs:// is gs://, abfs:// is az://
ALIASES = {"gs": "gcs", "az": "abfs"}


def test_alias_scheme_names_the_same_bucket(store, store_env):
    """gcs:// names the same bucket as gs://, and abfs:// the same container as az://."""
    emulator, uploaded = store
    url, local = uploaded["sparse"]
    alias = ALIASES[emulator.scheme] + "://" + url.partition("://")[2]
    remote = run(["cat", *emulator.options, alias, "schema/current.yaml"])
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == run(["cat", local, "schema/current.yaml"]).stdout


def test_missing_container_is_one_line(store, store_env):
    emulator, _ = store
    res = run(["ls", *emulator.options, f"{emulator.scheme}://no-such-container-here/arr"])
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdbfs: error: ") and "Traceback" not in res.stderr
    assert "no-such-container-here" in lines[0]


def test_emulator_log_shows_ranged_reads(store, store_env):
    """A tile is read with ranged GETs (206), never a whole download: seen in the emulator's own access log."""
    emulator, uploaded = store
    url, local = uploaded["dense"]
    fragment = run(["ls", local, "fragments"]).stdout.split()[0].rstrip("/")
    before = len(Path(emulator.log_path).read_bytes())
    res = run(["cat", *emulator.options, url, f"fragments/{fragment}/attrs/a0/tile_1.bin"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == run(["cat", local, f"fragments/{fragment}/attrs/a0/tile_1.bin"]).stdout
    new = Path(emulator.log_path).read_bytes()[before:].decode(errors="replace")
    reads = [ln for ln in new.splitlines() if "GET " in ln and "a0.tdb" in ln]
    assert reads and all('" 206 ' in ln + " " for ln in reads), new
