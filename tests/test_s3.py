"""Arrays in S3 (a real moto server on loopback), mounted and checked without a local copy.

Each array is written with tiledb-py, into the bucket or locally and uploaded byte for byte; the
mount of its s3:// URL must show exactly the tree the mount of the same objects copied to a local
folder shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

import arrays  # noqa: E402
from mounting import daemon_pids, mounted, tdbfs_command, tree_contents  # noqa: E402
from s3_server import ACCESS_KEY, BUCKET, SECRET_KEY, S3Server  # noqa: E402


#: the kinds uploaded from a local build (tests/arrays.py), beside the one written straight into the bucket
UPLOADED = {
    "sparse": dict(ndim=2),
    "var_strings": {},
    "metadata": {},
    "consolidated": dict(vacuum_after=False),
}


@pytest.fixture
def s3_env(s3, monkeypatch):
    """The test process's own environment pointed at the server (tdbfs subprocesses inherit it)."""
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    return s3.env


def write_dense(s3, prefix: str) -> str:
    """A dense array written by tiledb-py straight into the bucket, in two fragments."""
    url = f"s3://{BUCKET}/{prefix}"
    ctx = s3.ctx()
    dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 399), tile=50, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=False,
                                attrs=[tiledb.Attr("a", dtype=np.float64, filters=[tiledb.ZstdFilter()])])
    tiledb.Array.create(url, schema, ctx=ctx)
    for start in (0, 200):
        with tiledb.open(url, "w", ctx=ctx) as arr:
            arr[start:start + 200] = np.arange(start, start + 200, dtype=np.float64) / 4
    return url


def run(args, env=None, timeout=120):
    return subprocess.run(tdbfs_command() + list(args), capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def s3_arrays(s3, tmp_path_factory):
    """name -> (URL, the local folder holding the same objects)."""
    base = tmp_path_factory.mktemp("s3_arrays")
    out = {"dense": write_dense(s3, "dense")}
    for kind, options in UPLOADED.items():
        built = arrays.make_array(base / "built", kind, **options)
        out[kind] = s3.upload(built.path, kind)
    return {name: (url, s3.download(url.split("/", 3)[3], base / "copies" / name)) for name, url in out.items()}


@pytest.mark.parametrize("name", ["dense", *UPLOADED])
def test_mounted_tree_is_byte_identical_to_the_local_copy(s3_arrays, s3_env, name):
    url, local = s3_arrays[name]
    # the local mount checks nothing in the background either (an object store's default): the same `checked:`
    with mounted(url) as remote_mnt, mounted(local, extra_args=["-o", "check=off"]) as local_mnt:
        remote = tree_contents(remote_mnt, (url, str(local)))
        here = tree_contents(local_mnt, ("", ""))
        assert sorted(remote) == sorted(here)
        different = [k for k in here if remote[k] != here[k]]
        assert different == []
        fragments = os.listdir(remote_mnt / "fragments")
        assert fragments and len(fragments) == len(os.listdir(local_mnt / "fragments"))
        assert f"uri: {url}\n".encode() in (remote_mnt / "array.yaml").read_bytes()
        with open("/proc/self/mountinfo") as f:
            assert any(url in line and str(remote_mnt) in line for line in f)   # the mount's source is the URL


def test_tiles_read_from_s3_are_what_tiledb_reads(s3_arrays, s3_env, s3):
    url, _ = s3_arrays["dense"]
    with tiledb.open(url, ctx=s3.ctx()) as arr:
        expected = arr[:]["a"] if isinstance(arr[:], dict) else arr[:]
    with mounted(url) as mnt:
        frags = sorted(os.listdir(mnt / "fragments"))
        values = np.concatenate([np.frombuffer((mnt / "fragments" / f / "attrs" / "a0" / f"tile_{k}.bin").read_bytes(),
                                               dtype=np.float64) for f in frags for k in range(4)])
    assert np.array_equal(values, expected)


def test_ls_cat_tree_take_the_url(s3_arrays, s3_env):
    url, local = s3_arrays["sparse"]
    for args in (["ls", "-l"], ["tree", "--depth", "2"], ["cat"]):
        extra = ["schema/current.yaml"] if args == ["cat"] else []
        remote = run([*args, url, *extra])
        here = run([*args, str(local), *extra])
        assert remote.returncode == 0 == here.returncode, remote.stderr
        if args[0] == "ls":   # times, and sizes of the files holding the URI, differ: the names do not
            assert [ln.split()[-1] for ln in remote.stdout.splitlines()] == \
                [ln.split()[-1] for ln in here.stdout.splitlines()]
        else:
            assert remote.stdout == here.stdout
    assert "fragments/" in run(["ls", url]).stdout.splitlines()


def test_check_finds_uploaded_damage_as_on_local_disk(s3, s3_arrays, s3_env, tmp_path):
    _, pristine = s3_arrays["sparse"]
    damaged = shutil.copytree(pristine, tmp_path / "damaged")
    frag = sorted((damaged / "__fragments").iterdir())[0]
    target = frag / "a0.tdb"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    (damaged / "__fragments" / "stray.txt").write_bytes(b"not TileDB's")
    url = s3.upload(damaged, "damaged")
    remote = run(["check", url])
    here = run(["check", str(damaged)])
    assert remote.returncode == 1 == here.returncode
    assert remote.stdout.replace(url, str(damaged)) == here.stdout
    assert "stray.txt" in remote.stdout and "a0.tdb" in remote.stdout
    clean = run(["check", s3_arrays["dense"][0]])
    assert clean.returncode == 0 and "clean" in clean.stdout


def test_fragments_written_while_mounted_appear(s3, s3_env):
    url = write_dense(s3, "growing")
    with mounted(url) as mnt:
        before = sorted(os.listdir(mnt / "fragments"))
        assert len(before) == 2
        with tiledb.open(url, "w", ctx=s3.ctx()) as arr:
            arr[0:50] = np.full(50, 7.0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(os.listdir(mnt / "fragments")) == 2:
            time.sleep(0.2)
        after = sorted(os.listdir(mnt / "fragments"))
        assert len(after) == 3 and set(before) < set(after)
        new = (set(after) - set(before)).pop()
        tile = np.frombuffer((mnt / "fragments" / new / "attrs" / "a0" / "tile_0.bin").read_bytes(), dtype=np.float64)
        assert np.array_equal(tile, np.full(50, 7.0))
        assert b"committed: true" in (mnt / "fragments" / new / "fragment.yaml").read_bytes()


def test_a_stopped_server_gives_eio_and_a_problem_and_the_daemon_survives(tmp_path):
    server = S3Server.start()
    url = write_dense(server, "fragile")
    env = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1"}
    log = tmp_path / "daemon.log"
    stopped = False
    try:
        with mounted(url, extra_args=["-o", "timeout=5", "--log", str(log)], env=env) as mnt:
            frag = sorted(os.listdir(mnt / "fragments"))[0]
            folder = mnt / "fragments" / frag
            footer = (folder / "footer.yaml").read_bytes()
            first = (folder / "attrs" / "a0" / "tile_0.bin").read_bytes()
            server.stop()
            stopped = True
            reader = subprocess.run(["cat", str(folder / "attrs" / "a0" / "tile_3.bin")], capture_output=True,
                                    text=True, timeout=60)
            assert reader.returncode != 0 and "Input/output error" in reader.stderr
            # the daemon still serves what it has: the listing last seen, the footer, the tile already read
            assert frag in os.listdir(mnt / "fragments")
            assert (folder / "footer.yaml").read_bytes() == footer
            assert (folder / "attrs" / "a0" / "tile_0.bin").read_bytes() == first
            problems = yaml.safe_load((folder / "fragment.yaml").read_text())["problems"]
            # the first read waited out the deadline; a read the kernel retried at once was not even sent
            assert problems and {p["structure"] for p in problems} == {"tile 3"}
            assert all(f"{url}/__fragments/{frag}/a0.tdb bytes 563-746: " in p["message"] for p in problems)
            assert "no answer within 5 s" in problems[0]["message"]
            assert daemon_pids(mnt)
    finally:
        if not stopped:
            server.stop()
    assert "no answer within 5 s" in log.read_text()


def test_missing_bucket_is_one_line(s3_env, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for args in (["ls", "s3://no-such-bucket/array"], ["mount", "s3://no-such-bucket/array", str(mnt)],
                 ["check", "s3://no-such-bucket/array"]):
        res = run(args)
        assert res.returncode in (1, 2) and res.returncode == (2 if args[0] == "check" else 1)
        assert res.stderr == "tdbfs: error: bucket not found: s3://no-such-bucket\n"
    res = run(["ls", f"s3://{BUCKET}/no/such/array"])
    assert (res.returncode, res.stderr) == (1, f"tdbfs: error: array not found: s3://{BUCKET}/no/such/array\n")


def test_missing_extra_names_what_to_install(tmp_path):
    # gcsfs and adlfs are present here: hide one by an empty module that fails to import
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "gcsfs.py").write_text("raise ImportError('hidden by the test')\n")
    res = run(["ls", "gs://bucket/array"], env={"PYTHONPATH": str(shadow)})
    assert res.returncode == 1
    assert res.stderr == "tdbfs: error: gs:// URLs need the 'gcs' extra: pip install 'tdbfs[gcs]'\n"


def test_bad_credentials_are_one_line_at_mount_time(tmp_path):
    server = S3Server.start(authenticating=True)
    try:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        env = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG1",
               "AWS_SECRET_ACCESS_KEY": "wrong", "AWS_DEFAULT_REGION": "us-east-1"}
        res = run(["mount", "-o", "timeout=5", f"s3://{BUCKET}/array", str(mnt)], env=env)
        assert res.returncode == 1
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tdbfs: error: access denied to s3://{BUCKET}/array")
        assert "Traceback" not in res.stderr and "wrong" not in res.stderr.replace("AKIAWRONG", "")
        assert not os.listdir(mnt)
    finally:
        server.stop()


def test_secrets_given_as_options_stay_out_of_argv_logs_and_views(s3, s3_arrays, tmp_path):
    url, _ = s3_arrays["dense"]
    log = tmp_path / "daemon.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    options = f"s3.endpoint_url={s3.endpoint},s3.key={ACCESS_KEY},s3.secret={SECRET_KEY}"
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with mounted(url, extra_args=["-o", options, "--log", str(log), "--debug"]) as mnt:
            shown = (mnt / "array.yaml").read_text()
            frag = sorted(os.listdir(mnt / "fragments"))[0]
            (mnt / "fragments" / frag / "footer.yaml").read_bytes()
            pids = daemon_pids(mnt)
            assert pids
            for pid in pids:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                assert SECRET_KEY.encode() not in argv and ACCESS_KEY.encode() not in argv
                assert s3.endpoint.encode() in argv   # what is not secret is still passed as given
            assert SECRET_KEY not in shown and f"uri: {url}" in shown
    finally:
        os.environ.clear()
        os.environ.update(saved)
    text = log.read_text()
    assert url in text and SECRET_KEY not in text and ACCESS_KEY not in text


def test_backend_options_are_checked_before_anything_runs(s3_env):
    res = run(["ls", "-o", "allow_other", f"s3://{BUCKET}/dense"])
    assert res.returncode == 2 and "not a backend option" in res.stderr
    res = run(["ls", "-o", "timeout=soon", f"s3://{BUCKET}/dense"])
    assert res.returncode == 2 and "needs a number of seconds" in res.stderr


def test_cache_dir_survives_a_remount(s3, s3_arrays, s3_env, tmp_path):
    url, _ = s3_arrays["dense"]
    cache = tmp_path / "ranges"
    with mounted(url, extra_args=["--cache-dir", str(cache)]) as mnt:
        frag = sorted(os.listdir(mnt / "fragments"))[0]
        first = (mnt / "fragments" / frag / "attrs" / "a0" / "tile_2.bin").read_bytes()
    kept = sorted(os.path.join(d, f) for d, _, files in os.walk(cache) for f in files)
    assert kept and not any(os.path.basename(f).startswith(".part-") for f in kept)
    # a remount reads the same ranges: served from the folder (the store-level test counts no GET), so the
    # folder gains nothing
    with mounted(url, extra_args=["--cache-dir", str(cache)]) as mnt:
        assert (mnt / "fragments" / frag / "attrs" / "a0" / "tile_2.bin").read_bytes() == first
    assert sorted(os.path.join(d, f) for d, _, files in os.walk(cache) for f in files) == kept
