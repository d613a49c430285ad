"""AES-256-GCM encrypted arrays (docs/format.md §2.1, §3.1, §3.3), written by tiledb-py with a key.

With the key every tile equals TileDB's read with the key; without it every encrypted
structure is an error that says so while the unencrypted headers stay visible; a wrong key
fails the GCM tag; the key reaches tdbfs only through a file or the environment and never
shows in argv, logs or views.
"""

from __future__ import annotations

import base64
import os
import subprocess

import pytest
import tiledb
import yaml

import reference
from arrays import ENCRYPTION_KEY, encryption_ctx
from mounting import tdbfs_command
from test_tiles_match_tiledb import _check_fragment, _read
from tdbfs.format.reversers.encryption import BAD_TAG_MESSAGE, NO_KEY_MESSAGE, BadKeyError, parse_key
from tdbfs.frontend.keys import key_from_environment
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import DirNode, ViewError, resolve
from tdbfs.views.tree import build_root

KEY = parse_key(ENCRYPTION_KEY.encode(), "test")
WRONG = parse_key(b"W" * 32, "test")


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory):
    import arrays
    base = tmp_path_factory.mktemp("encrypted")
    return {"sparse": arrays.make_array(base, "encrypted", name="sparse"),
            "dense": arrays.make_array(base, "encrypted", name="dense", sparse=False),
            "var_strings": arrays.make_array(base, "encrypted", name="var_strings", var_strings=True)}


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "key"
    path.write_text(ENCRYPTION_KEY + "\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("kind", ["sparse", "dense", "var_strings"])
def test_with_the_key_every_tile_matches_tiledb(encrypted, kind):
    built = encrypted[kind]
    root = build_root(ArrayStore(str(built.path), key=KEY))
    names = reference.list_fragments(built.path)
    with tiledb.scope_ctx(encryption_ctx()):
        for name in names:
            _check_fragment(root, built, name)
    summary = yaml.safe_load(_read(root, "array.yaml"))
    assert summary["encryption"]["type"] == "AES_256_GCM" and summary["encryption"]["key_given"] is True
    assert summary["problems"] == []


def test_every_generic_tile_and_data_tile_is_encrypted(encrypted):
    built = encrypted["sparse"]
    store = ArrayStore(str(built.path), key=KEY)
    frag = store.fragments()[0]
    assert store.encryption_type() == 1 and frag.encrypted()
    fm_file = f"{frag.rel}/__fragment_metadata.tdb"
    rtree = store.generic_tile(fm_file, frag.footer().generic_tile_offsets.rtree, "R-tree")
    assert rtree.header.encryption_type == 1 and [f.id for f in rtree.header.filters.filters] == [1, 11]
    assert rtree.chunks[0].stages[-1]["filter"] == "AES_256_GCM"
    (meta,) = store.metadata_files()
    assert store.generic_tile(meta, 0, "metadata").header.encryption_type == 1
    field = frag.field_by_stem("a0")
    tile = frag.tile(field, 0, "data")
    aes = tile.chunks[0].stages[-1]
    assert aes["filter"] == "AES_256_GCM" and aes["position"] == 3  # after BYTESHUFFLE, ZSTD, SHA256
    assert all(p["tag_ok"] and len(p["iv"]) == 24 and len(p["tag"]) == 32 for p in aes["parts"])
    root = build_root(store)
    record = yaml.safe_load(_read(root, f"fragments/{frag.name}/attrs/a0/tile_0.yaml"))
    assert record["streams"]["data"]["chunks"][0]["stages"][-1]["parts"] == aes["parts"]
    merged = yaml.safe_load(_read(root, "metadata/merged.yaml"))
    assert "secret" in yaml.safe_dump(merged) and "value" in yaml.safe_dump(merged)


def test_without_the_key_encrypted_structures_fail_and_headers_stay_visible(encrypted):
    built = encrypted["sparse"]
    store = ArrayStore(str(built.path))
    root = build_root(store)
    summary = yaml.safe_load(_read(root, "array.yaml"))
    enc = summary["encryption"]
    assert enc["type"] == "AES_256_GCM" and enc["key_given"] is False
    gt = enc["schema_generic_tile"]
    assert gt["encryption_type"] == 1 and [f["name"] for f in gt["filter_pipeline"]["filters"]] == ["GZIP", "AES_256_GCM"]
    parts = gt["chunks"][0]["aes_256_gcm_parts"]
    assert [p["part"] for p in parts] == ["metadata 0", "data 0"] and all(len(p["iv"]) == 24 for p in parts)
    assert any(p["message"] == NO_KEY_MESSAGE and p["file"].startswith("__schema/") for p in summary["problems"])
    # The fragment folder lists, its raw files read, its decoded structures do not.
    (name,) = reference.list_fragments(built.path)
    frag_dir = resolve(root, f"fragments/{name}")
    raw = resolve(root, f"fragments/{name}/raw/a0.tdb")
    assert raw.read(0, 8) == (built.path / "__fragments" / name / "a0.tdb").read_bytes()[:8]
    with pytest.raises(ViewError, match="encrypted with AES-256-GCM"):
        resolve(root, f"fragments/{name}/attrs").children()
    assert "fragment.yaml" in frag_dir.children()
    frag_summary = yaml.safe_load(_read(root, f"fragments/{name}/fragment.yaml"))
    assert any("encrypted with AES-256-GCM" in p["message"] for p in frag_summary["problems"])


def test_a_wrong_key_fails_the_tag(encrypted):
    built = encrypted["sparse"]
    store = ArrayStore(str(built.path), key=WRONG)
    root = build_root(store)
    summary = yaml.safe_load(_read(root, "array.yaml"))
    bad = [p for p in summary["problems"] if BAD_TAG_MESSAGE in p["message"]]
    assert bad and bad[0]["file"].startswith("__schema/") and bad[0]["offset"] > 0
    assert "AES_256_GCM" in bad[0]["message"]


def test_data_tile_with_a_wrong_key_names_file_and_offset(encrypted):
    built = encrypted["dense"]
    good = ArrayStore(str(built.path), key=KEY)
    frag = good.fragments()[0]
    field = frag.field_by_stem("a1")
    loc = frag.location(field, 0, "var")  # the tile lists are decoded with the right key
    good.key = WRONG  # metadata decoded with the right key; the data tiles now meet the wrong one
    with pytest.raises(Exception) as err:
        frag.tile(field, 0, "var")
    assert BAD_TAG_MESSAGE in str(err.value) and "a1_var.tdb" in str(err.value)
    assert err.value.offset == loc.offset + 8 + 12  # chunk 0's metadata


@pytest.mark.parametrize("raw", [
    ENCRYPTION_KEY.encode(), (ENCRYPTION_KEY + "\n").encode(), (ENCRYPTION_KEY + "\r\n").encode(),
    ENCRYPTION_KEY.encode().hex().encode() + b"\n", base64.b64encode(ENCRYPTION_KEY.encode()),
])
def test_key_formats(raw, encrypted):
    key = parse_key(raw, "k")
    store = ArrayStore(str(encrypted["sparse"].path), key=key)
    assert store.schema(store.latest_schema_file()).attributes  # decrypts
    assert ENCRYPTION_KEY not in repr(key) and ENCRYPTION_KEY not in str(key)


def test_bad_key_message_does_not_show_the_key():
    with pytest.raises(BadKeyError) as err:
        parse_key(b"secret-but-too-short", "key file /x")
    assert "secret" not in str(err.value) and "key file /x" in str(err.value)


def test_key_from_environment(tmp_path, key_file):
    assert key_from_environment({}) is None
    assert key_from_environment({"TDBFS_KEY_FILE": str(key_file)}) is not None
    assert key_from_environment({"TDBFS_ENCRYPTION_KEY": ENCRYPTION_KEY}) is not None
    with pytest.raises(BadKeyError):
        key_from_environment({"TDBFS_ENCRYPTION_KEY": "short"})


def _cli(*args, env=None):
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("TDBFS_")}
    run_env.update(env or {})
    return subprocess.run(tdbfs_command() + list(args), capture_output=True, timeout=120, env=run_env)


def test_cli_cat_with_key_file_and_environment(encrypted, key_file):
    built = encrypted["sparse"]
    (name,) = reference.list_fragments(built.path)
    path = f"fragments/{name}/attrs/a0/tile_0.txt"
    with_file = _cli("cat", "--key-file", str(key_file), str(built.path), path)
    assert with_file.returncode == 0, with_file.stderr
    via_env_file = _cli("cat", str(built.path), path, env={"TDBFS_KEY_FILE": str(key_file)})
    via_env_value = _cli("cat", str(built.path), path, env={"TDBFS_ENCRYPTION_KEY": ENCRYPTION_KEY})
    assert with_file.stdout == via_env_file.stdout == via_env_value.stdout and with_file.stdout
    without = _cli("cat", str(built.path), path)
    assert without.returncode != 0 and b"encrypted with AES-256-GCM" in without.stderr
    assert ENCRYPTION_KEY.encode() not in with_file.stderr + without.stderr


def test_mount_with_key_file(encrypted, key_file, mount, tmp_path):
    built = encrypted["var_strings"]
    log = tmp_path / "daemon.log"
    mnt = mount(built.path, extra_args=["--key-file", str(key_file), "--log", str(log), "--debug"])
    (name,) = os.listdir(mnt / "fragments")
    tile = mnt / "fragments" / name / "attrs" / "a0" / "tile_0.txt"
    res = subprocess.run(["cat", str(tile)], capture_output=True, timeout=30)
    assert res.returncode == 0 and res.stdout.splitlines()[0] == b'"same"'
    # The key is in no process's argv and in no view, and not in the log.
    key = ENCRYPTION_KEY.encode()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    assert key not in f.read()
            except OSError:
                pass
    ps = subprocess.run(["ps", "axww", "-o", "args"], capture_output=True, timeout=30).stdout
    assert b"tdbfs.cli mount" in ps and key not in ps
    assert key not in log.read_bytes()
    for dirpath, _dirs, files in os.walk(mnt):
        if "/raw" in dirpath or dirpath.endswith("/raw"):
            continue
        for f in files:
            if f.endswith((".yaml", ".txt", ".csv")):
                assert key not in open(os.path.join(dirpath, f), "rb").read(), f


def test_mount_without_key_keeps_serving(encrypted, mount):
    built = encrypted["dense"]
    mnt = mount(built.path)
    summary = yaml.safe_load((mnt / "array.yaml").read_bytes())
    assert summary["encryption"]["key_given"] is False
    assert any(NO_KEY_MESSAGE == p["message"] for p in summary["problems"])
    schemas = [p for p in (mnt / "schema").iterdir() if p.suffix == ".yaml"]
    assert schemas
    for p in schemas:
        res = subprocess.run(["cat", str(p)], capture_output=True, timeout=30)
        assert res.returncode != 0 and b"Input/output error" in res.stderr
    (name,) = os.listdir(mnt / "fragments")
    res = subprocess.run(["ls", str(mnt / "fragments" / name / "attrs")], capture_output=True, timeout=30)
    assert res.returncode != 0
    assert (mnt / "README.txt").read_bytes().startswith(b"tdbfs")
    assert yaml.safe_load((mnt / "array.yaml").read_bytes())["encryption"]["type"] == "AES_256_GCM"


def test_unencrypted_array_reports_no_encryption(sample_arrays):
    root = build_root(ArrayStore(str(sample_arrays["sparse_1d"].path), key=KEY))
    enc = yaml.safe_load(_read(root, "array.yaml"))["encryption"]
    assert enc == {"type": "NONE", "key_given": True}
    assert isinstance(resolve(root, "fragments"), DirNode)


