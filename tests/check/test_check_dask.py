"""`tdbfs check --dask ADDRESS` on a real distributed.LocalCluster (a scheduler and two worker processes
on loopback): the printed lines, the JSON document and the exit status are those of `--jobs 1`, on
pristine and damaged arrays, a group, an encrypted array and arrays in S3 (moto's server), while the
workers, not the CLI, check the fragments. Secrets never travel: the workers use their own environment."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

tiledb = pytest.importorskip("tiledb")
pytest.importorskip("distributed")
pytest.importorskip("moto")
pytest.importorskip("s3fs")

import arrays  # noqa: E402
import groups  # noqa: E402
from dask_cluster import computed_keys, local_cluster  # noqa: E402
from mounting import tdbfs_command  # noqa: E402
from test_s3 import write_dense  # noqa: E402
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, free_port  # noqa: E402

from tdbfs.check.check import check_array  # noqa: E402
from tdbfs.check.dask_executor import DaskExecutor, fingerprint, shippable, versions, worker_facts  # noqa: E402
from tdbfs.check.work import StoreSpec, new_run, plan  # noqa: E402
from tdbfs.frontend.common import open_store  # noqa: E402
from tdbfs.store import ArrayStore  # noqa: E402
from tdbfs.store.fragment import DATA  # noqa: E402
from tdbfs.store.storage.remote import RemoteSettings  # noqa: E402

#: what the workers have and the CLI's environment does not: S3 credentials (not its endpoint, which
#: travels in the spec) and the encryption key
WORKER_ENV = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION,
              "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true", "TDBFS_ENCRYPTION_KEY": arrays.ENCRYPTION_KEY}

_OURS = ("AWS_", "TDBFS_")


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(WORKER_ENV) as c:
        yield c


def cli_env(**extra: str) -> dict[str, str]:
    """This environment without AWS_* and TDBFS_* (so nothing reaches a worker unless the spec carries
    it), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
    env.update(extra)
    return env


def run_check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(tdbfs_command() + ["check", *args], capture_output=True, text=True, timeout=300,
                          env=env if env is not None else cli_env(), stdin=subprocess.DEVNULL)


def same_as_jobs_1(cluster, target: str, *options: str, env: dict | None = None) -> dict:
    """Run `check --jobs 1` and `check --dask` on `target`, as lines and as JSON; assert the same stdout and
    exit status, nothing on stderr, and that the cluster's workers checked every fragment. The JSON document."""
    before = computed_keys(cluster)
    outputs = []
    for extra in ([], ["--json"]):
        local = run_check("--jobs", "1", *extra, *options, target, env=env)
        dask = run_check("--dask", cluster.scheduler_address, *extra, *options, target, env=env)
        assert dask.stderr == "" and local.stderr == "", (dask.stderr, local.stderr)
        assert dask.stdout == local.stdout
        assert dask.returncode == local.returncode
        outputs.append(local)
    doc = json.loads(outputs[1].stdout)
    assert outputs[0].returncode == (0 if doc["clean"] else 1)
    assert outputs[0].stdout.splitlines()[-1].startswith(f"{target}: ") or doc.get("members") is not None
    after = computed_keys(cluster)
    ran = sum(len(after[w] - before.get(w, set())) for w in after)
    # without a split, one task per fragment, and two runs (lines and JSON)
    assert doc["counts"]["fragments"] > 0 and ran == 2 * doc["counts"]["fragments"]
    return doc


# -- local arrays (the workers run on this machine, so a local path is a shared one) ---------------------

@pytest.mark.parametrize("kind, options", [
    ("sparse", dict(n_fragments=3)),      # a0 int32 ZSTD, a1 var string, a2 nullable float64 (dense: below)
    ("consolidated", dict()),             # fragments consolidated, not vacuumed: a hint, no warning
])
def test_pristine_arrays_check_as_with_jobs_1(cluster, tmp_path, kind, options):
    built = arrays.make_array(tmp_path, kind, **options)
    doc = same_as_jobs_1(cluster, str(built.path))
    assert doc["clean"] and doc["errors"] == 0 and doc["counts"]["tiles"] > 0
    assert doc["counts"]["fragments"] == len(built.fragments())
    assert doc["warnings"] == 0 and doc["problems"] == []


def damaged_array(base: Path) -> tuple[Path, list[str]]:
    """Four fragments, each damaged its own way: a flipped byte in a ZSTD tile, a truncated footer, a
    missing commit file, a data file longer than its footer says. The fragment names, in order."""
    built = arrays.make_array(base, "sparse", n_fragments=4, cells=12)
    root = built.path
    store = ArrayStore(str(root))
    frags = store.fragments()
    a0 = frags[0].field_by_stem("a0")
    loc = frags[0].location(a0, 0, DATA)
    with open(root / loc.file, "r+b") as f:
        f.seek(loc.offset + loc.persisted_size - 3)
        b = f.read(1)[0]
        f.seek(-1, 1)
        f.write(bytes([b ^ 0xFF]))
    with open(root / frags[1].rel / "__fragment_metadata.tdb", "r+b") as f:
        f.truncate(40)
    names = [f.rel.rsplit("/", 1)[1] for f in frags]
    os.remove(root / "__commits" / f"{names[2]}.wrt")
    with open(root / frags[3].rel / "a1.tdb", "ab") as f:
        f.write(b"\0" * 7)
    return root, names


def test_damaged_array_checks_as_with_jobs_1(cluster, tmp_path):
    root, names = damaged_array(tmp_path)
    doc = same_as_jobs_1(cluster, str(root))
    assert not doc["clean"]
    files = [p["file"] for p in doc["problems"] if p["severity"] == "error"]
    for name in names:   # every damaged fragment is reported
        assert any(name in f for f in files), (name, files)
    tile = [p for p in doc["problems"] if p["structure"] == "tile 0" and names[0] in p["file"]]
    assert tile and tile[0]["file"].endswith("/a0.tdb")


def test_group_checks_as_with_jobs_1(cluster, tmp_path):
    built = groups.build_nested(tmp_path)
    doc = same_as_jobs_1(cluster, str(built.path))
    assert doc["members"] and doc["counts"]["members"] > 0
    assert doc["counts"]["fragments"] == sum(m["counts"].get("fragments", 0) for m in doc["members"])


def test_encrypted_array_is_checked_with_the_workers_own_key(cluster, tmp_path):
    built = arrays.build_encrypted(tmp_path / "enc")
    env = cli_env(TDBFS_ENCRYPTION_KEY=arrays.ENCRYPTION_KEY)
    doc = same_as_jobs_1(cluster, str(built.path), env=env)
    assert doc["clean"] and doc["counts"]["tiles"] > 0


def test_progress_bar_counts_the_fragments_the_workers_send_back(cluster, tmp_path):
    """With stderr a terminal, the bar moves as results come back, up to every fragment; stdout is the
    report alone."""
    from terminal import run_with_terminal_stderr

    built = arrays.make_array(tmp_path, "sparse", n_fragments=3)
    res, seen = run_with_terminal_stderr(
        tdbfs_command() + ["check", "--dask", cluster.scheduler_address, str(built.path)], timeout=300,
        env=cli_env(), stdin=subprocess.DEVNULL)
    frames = [f.decode() for f in seen.split(b"\r") if b"fragments" in f]
    assert res.returncode == 0 and res.stdout == run_check("--jobs", "1", str(built.path)).stdout.encode()
    assert " 0/3 fragments" in frames[0] and " 3/3 fragments" in frames[-1] and "tiles" in frames[-1]


def test_workers_with_another_key_is_one_line_before_any_work(cluster, tmp_path):
    other = "another-key-of-32-bytes-exactly!"
    built = arrays.build_encrypted(tmp_path / "enc", key=other)
    key_file = tmp_path / "key"
    key_file.write_text(other)
    before = computed_keys(cluster)
    res = run_check("--dask", cluster.scheduler_address, "--key-file", str(key_file), str(built.path))
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdbfs: error: the array is encrypted and Dask worker tcp://")
    assert "has another key" in lines[0] and "TDBFS_KEY_FILE" in lines[0] and other not in lines[0]
    assert computed_keys(cluster) == before


def test_workers_with_another_tdbfs_version_is_one_line(tmp_path, monkeypatch):
    """Workers whose tdbfs says it is another version (a sitecustomize on their PYTHONPATH changes it
    before anything imports tdbfs; worker processes inherit this process's environment) are refused
    before any task is sent."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import tdbfs\ntdbfs.__version__ = '0.0.0+other'\n")
    built = arrays.make_array(tmp_path, "sparse")
    env = cli_env()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    with local_cluster() as other:
        res = run_check("--dask", other.scheduler_address, str(built.path), env=env)
        ran = computed_keys(other)
    assert len(ran) == 2 and not any(ran.values())
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdbfs: error: Dask worker tcp://127.0.0.1:")
    assert "runs tdbfs 0.0.0+other, this is tdbfs " in lines[0]


def test_worker_facts_tell_keys_apart_without_showing_them(monkeypatch):
    monkeypatch.delenv("TDBFS_KEY_FILE", raising=False)
    monkeypatch.delenv("TDBFS_ENCRYPTION_KEY", raising=False)
    assert worker_facts() == (versions(), None) and set(versions()) == {"tdbfs", "distributed", "Python"}
    monkeypatch.setenv("TDBFS_ENCRYPTION_KEY", arrays.ENCRYPTION_KEY)
    version, key = worker_facts()
    assert key == fingerprint(arrays.ENCRYPTION_KEY.encode()) != fingerprint(b"x" * 32)
    assert arrays.ENCRYPTION_KEY not in key and arrays.ENCRYPTION_KEY.encode().hex() not in key
    monkeypatch.setenv("TDBFS_ENCRYPTION_KEY", "short")
    assert worker_facts()[1].startswith("bad key: ")


# -- tiles of one big fragment spread over the workers ---------------------------------------------------

def test_a_fragment_split_into_tile_ranges_gives_the_same_result(cluster, tmp_path):
    built = arrays.build_dense(tmp_path / "big", ndim=1, extent=4, tiles_per_dim=40,
                               fragments=[[(1, 160)], [(1, 80)]])
    path = str(built.path)
    alone = check_array(open_store(path, 64)).to_dict()
    before = computed_keys(cluster)
    with DaskExecutor(cluster.scheduler_address) as executor:
        split = check_array(open_store(path, 64), executor=executor, spec=StoreSpec(path, 64),
                            split_bytes=256).to_dict()
    assert split == alone and alone["clean"] and alone["counts"]["tiles"] > 100
    after = computed_keys(cluster)
    ran = sum(len(after[w] - before.get(w, set())) for w in after)
    assert ran > 2 * alone["counts"]["fragments"]      # a head and several tile ranges per fragment
    assert all(after[w] - before.get(w, set()) for w in after)   # both workers took some


def test_given_the_spec_every_worker_opens_the_array_before_the_first_task(cluster, tmp_path):
    """`tdbfs check --dask` asks the workers about their versions and has each open the array (one task
    pinned to each) while it plans; then the report is --jobs 1's."""
    import time

    built = arrays.make_array(tmp_path, "sparse", n_fragments=3)
    path = str(built.path)
    spec = StoreSpec(path, 64, run=new_run())
    before = computed_keys(cluster, "tdbfs-open-")

    def store_key():
        from tdbfs.check import work
        return work._store[0] if work._store is not None else None

    with DaskExecutor(cluster.scheduler_address, spec=spec) as executor:
        deadline = time.monotonic() + 120   # not a timing: how long a busy machine may take to run two tasks
        while True:
            after = computed_keys(cluster, "tdbfs-open-")
            opened = {w: after[w] - before.get(w, set()) for w in after}
            if all(opened.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(opened) == 2 and all(len(keys) == 1 for keys in opened.values()), opened
        assert set(executor.client.run(store_key).values()) == {pickle.dumps(shippable(spec))}
        result = check_array(open_store(path, 64), executor=executor, spec=spec).to_dict()
    assert result == check_array(open_store(path, 64)).to_dict() and result["counts"]["fragments"] == 3


def test_a_task_that_fails_on_its_worker_is_a_problem_not_a_crash(cluster, tmp_path):
    """What a worker raises (here divmod's TypeError: divmod pickles by reference, as run_task does) comes
    back as the task's "worker died" problem, one per task."""
    built = arrays.make_array(tmp_path, "sparse", n_fragments=3)
    path = str(built.path)
    tasks = plan(open_store(path, 64), StoreSpec(path, 64), 1 << 40)
    with DaskExecutor(cluster.scheduler_address) as executor:
        results = sorted(executor.run(divmod, StoreSpec(path, 64), tasks), key=lambda r: r.index)
    assert [r.index for r in results] == [t.index for t in tasks] and len(tasks) == 3
    for r, t in zip(results, tasks):
        (p,) = r.fragment_problems
        assert p.file == t.fragment and p.message.startswith(f"worker died while checking {t.fragment}: TypeError: ")
        assert "divmod" in p.message and r.counts == {}


# -- S3 (moto's server): the endpoint travels in the spec, the credentials stay on the workers -----------

@pytest.fixture(scope="module")
def s3_arrays(s3, tmp_path_factory):
    """{'dense': URL written by tiledb-py into the bucket, 'damaged': URL of an uploaded damaged array}."""
    url = write_dense(s3, "dask_dense")
    root, _ = damaged_array(tmp_path_factory.mktemp("s3_damaged"))
    return {"dense": url, "damaged": s3.upload(root, "dask_damaged")}


@pytest.mark.parametrize("name", ["dense", "damaged"])
def test_s3_arrays_check_as_with_jobs_1(cluster, s3, s3_arrays, name):
    env = cli_env(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_DEFAULT_REGION=REGION,
                  AWS_EC2_METADATA_DISABLED="true")
    doc = same_as_jobs_1(cluster, s3_arrays[name], "-o", f"s3.endpoint_url={s3.endpoint}", env=env)
    assert doc["array"] == s3_arrays[name] and doc["counts"]["tiles"] > 0
    assert doc["clean"] == (name == "dense")
    if name == "damaged":
        assert any(p["structure"] == "tile 0" for p in doc["problems"])


def test_s3_secret_options_stay_with_the_cli(cluster, s3, s3_arrays):
    """The CLI has the credentials only as -o options; the workers, which never get them, use theirs."""
    options = f"s3.endpoint_url={s3.endpoint},s3.key={ACCESS_KEY},s3.secret={SECRET_KEY}"
    env = cli_env(AWS_EC2_METADATA_DISABLED="true")
    doc = same_as_jobs_1(cluster, s3_arrays["damaged"], "-o", options, env=env)
    assert not doc["clean"] and SECRET_KEY not in json.dumps(doc)

    def spec_held():   # the spec each worker's store was opened from (check_work keeps it, pickled)
        import tdbfs.check.work as work
        return work._store[0] if work._store else b""

    from distributed import Client

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        held = client.run(spec_held)
    assert any(s3.endpoint.encode() in spec for spec in held.values())
    assert not any(SECRET_KEY.encode() in spec or ACCESS_KEY.encode() in spec for spec in held.values())


def test_the_spec_shipped_holds_no_secret():
    remote = RemoteSettings(options={"s3": {"endpoint_url": "http://127.0.0.1:9000", "key": ACCESS_KEY,
                                            "secret": SECRET_KEY,
                                            "client_kwargs": {"region_name": REGION, "aws_session_token": "tok-1"}},
                                     "az": {"account_name": "acct", "account_key": "az-secret-2"}},
                            timeout_s=7.0, cache_dir="/var/cache/tdbfs")
    key = arrays.ENCRYPTION_KEY.encode()
    shipped = shippable(StoreSpec("s3://b/a", 64, remote, key))
    blob = pickle.dumps(shipped)
    for secret in (SECRET_KEY, ACCESS_KEY, "tok-1", "az-secret-2"):
        assert secret.encode() not in blob
    assert key not in blob and shipped.key is None
    assert shipped.remote.options == {"s3": {"endpoint_url": "http://127.0.0.1:9000",
                                             "client_kwargs": {"region_name": REGION}},
                                      "az": {"account_name": "acct"}}
    assert shipped.remote.timeout_s == 7.0 and shipped.remote.cache_dir is None
    assert (shipped.location, shipped.cache_mb) == ("s3://b/a", 64)
    assert shipped.run and shippable(StoreSpec("/a", 64, run="one-check")).run == "one-check"


# -- the CLI's errors ---------------------------------------------------------------------------------------

def test_without_the_extra_it_is_one_line_naming_it(tmp_path):
    built = arrays.make_array(tmp_path, "sparse")
    code = "import sys; sys.modules['distributed'] = None; from tdbfs.cli import main; sys.exit(main())"
    res = subprocess.run([sys.executable, "-c", code, "check", "--dask", "tcp://127.0.0.1:8786", str(built.path)],
                         capture_output=True, text=True, timeout=60, env=cli_env(), stdin=subprocess.DEVNULL)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == "tdbfs: error: --dask needs the 'dask' extra: pip install 'tdbfs[dask]'\n"


def test_unreachable_scheduler_is_one_line(tmp_path):
    built = arrays.make_array(tmp_path, "sparse")
    address = f"tcp://127.0.0.1:{free_port()}"
    res = run_check("--dask", address, str(built.path))
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tdbfs: error: cannot reach the Dask scheduler at {address}: ")


def test_scheduler_file_is_an_address_too(cluster, tmp_path):
    built = arrays.make_array(tmp_path, "sparse")
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text(json.dumps({"address": cluster.scheduler_address}))
    by_file = run_check("--dask", str(scheduler_file), str(built.path))
    local = run_check("--jobs", "1", str(built.path))
    assert (by_file.returncode, by_file.stdout, by_file.stderr) == (0, local.stdout, "")
    not_one = tmp_path / "not_a_scheduler_file"
    not_one.write_text("address: tcp://127.0.0.1:1\n")
    bogus = run_check("--dask", str(not_one), str(built.path))
    assert bogus.returncode == 2 and bogus.stdout == ""
    assert bogus.stderr.startswith(f"tdbfs: error: not a Dask scheduler file: {not_one} (") and bogus.stderr.count("\n") == 1
