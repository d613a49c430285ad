"""Where a group's members are, and what they may show.

* A group written before TileDB 2.9 is its `__tiledb_group.tdb` marker and the arrays (formats 1-9)
  and groups in its folder, as every TileDB-VCF dataset of 2020-21: a TileDB group, whose members
  are TileDB arrays, never a TileDB 0.x workspace (the 0.x side: tests/test_legacy0x_arrays.py).
  tiledb-py's Group lists no member of such a group, so each member array is compared with
  tiledb-py's own read of it, and with the array mounted on its own.
* Members added by absolute URI (a path or a `file://` URI into the group's own folder, as
  tiledbsoma writes them) are members, not strangers.
* A member outside the group's folder (absolute, or a relative URI climbing out with '..', which is
  a warning) shows with the permissions of its own folder: read as `nobody` through
  `-o allow_other`, a member in a 0700 folder is not readable, the group's own files are.
* No member is reached through a symlink, whichever way its URI is written.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import tiledb
import yaml

import corpus
import groups
from mounting import tdbfs_command
from tdbfs.check.check import check_array
from tdbfs.store import ArrayStore
from tdbfs.store.group_store import GroupStore, MemberError
from tdbfs.store.open_array import open_array

NOBODY = (65534, 65534)


def run(*args, check=True, user=None) -> subprocess.CompletedProcess:
    cmd = list(args)
    if user is not None:
        cmd = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *cmd]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/")
    if check:
        assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res


def read_yaml(path) -> dict:
    return yaml.safe_load(run("cat", str(path)).stdout)


# -- 1. a group written before TileDB 2.9 ----------------------------------------------------------

#: member path in the group -> back-compat corpus folder of the array put there (format = its number)
OLD_MEMBERS = {"data": "v05", "metadata/vcf_headers": "v04", "qs": "v02", "hilbert": "v08"}


def old_group(base: Path) -> Path:
    """A TileDB-VCF dataset as its 2020-21 releases laid it out: a marker-only group holding the `data`
    array, a marker-only `metadata` group holding an array, and two more arrays; every array a real one
    of formats 2-8 from the back-compat corpus (tiledb-py writes only its own format, and a group of
    that era is nothing but the marker: made by hand)."""
    top = base / "dataset"
    top.mkdir(parents=True)
    (top / "__tiledb_group.tdb").write_bytes(b"")
    (top / "metadata").mkdir()
    (top / "metadata" / "__tiledb_group.tdb").write_bytes(b"")
    for rel, folder in OLD_MEMBERS.items():
        shutil.copytree(corpus.array(folder), top / rel)
    return top


def tiledb_cells(path: Path) -> tuple[int, list[str]]:
    """(fragments, the first dimension's values as text, sorted) as tiledb-py reads the array."""
    frags = len(tiledb.array_fragments(str(path)))
    with tiledb.open(str(path)) as A:
        dim = A.schema.domain.dim(0).name
        if frags == 0:
            return 0, []
        values = A.query(dims=[dim], attrs=[])[:][dim]
    return frags, sorted(str(v) for v in values.tolist())


def shown_cells(csv_text: str) -> list[str]:
    rows = list(csv.reader(io.StringIO(csv_text)))
    return sorted(row[0] for row in rows[1:])


@pytest.mark.backcompat
def test_a_group_written_before_2_9_is_a_tiledb_group_of_its_arrays(tmp_path):
    top = old_group(tmp_path)
    store = open_array(str(top))
    assert isinstance(store, GroupStore) and store.marker_only()
    assert [(m.shown, m.member.type_name) for m in store.members()] == [
        ("data", "array"), ("hilbert", "array"), ("metadata", "group"), ("qs", "array")]
    meta = store.member_store("metadata")
    assert isinstance(meta, GroupStore) and [m.shown for m in meta.members()] == ["vcf_headers"]
    for rel in OLD_MEMBERS:
        parent, _, name = rel.rpartition("/")
        member = (meta if parent else store).member_store(name)
        # a TileDB array of its own format, decoded as such (not with the 0.x parser)
        assert type(member) is ArrayStore and member.path == str(top / rel), rel
        assert member.findings() == [], (rel, member.findings())
    assert store.findings() == []
    result = check_array(store)
    assert result.clean and not result.warnings and result.counts["members"] == 4
    assert sorted(m.array for m in result.members) == ["data", "hilbert", "metadata", "qs"]
    # TileDB 2.9 on lists no member of such a group: each array is compared on its own below
    with tiledb.Group(str(top)) as g:
        assert len(g) == 0


@pytest.mark.backcompat
def test_a_group_written_before_2_9_mounts_with_group_yaml_and_its_arrays_as_tiledb_reads_them(tmp_path, mount):
    top = old_group(tmp_path)
    mnt = mount(top, extra_args=["-o", "check=off"])  # two trees compared byte for byte: no background check
    assert sorted(os.listdir(mnt)) == ["README.txt", "group.yaml", "group_details", "members", "metadata"]
    summary = read_yaml(mnt / "group.yaml")
    assert summary["kind"] == "group" and summary["marker_only"] is True and summary["problems"] == []
    assert [(m["name"], m["type"], m["location"]) for m in summary["members"]] == [
        ("data", "array", str(top / "data")), ("hilbert", "array", str(top / "hilbert")),
        ("metadata", "group", str(top / "metadata")), ("qs", "array", str(top / "qs"))]
    for rel in OLD_MEMBERS:
        inside = mnt.joinpath(*[p for part in rel.split("/") for p in ("members", part)])
        alone = mount(top / rel, extra_args=["-o", "check=off"])
        via_group, own = groups.walk_bytes(inside), groups.walk_bytes(alone)
        assert "array.yaml" in own and via_group == own, rel
        doc = yaml.safe_load(own["array.yaml"][1])
        assert doc["problems"] == [] and "TileDB 0.x" not in str(doc.get("layout")), rel
        frags, values = tiledb_cells(top / rel)
        assert len(os.listdir(inside / "fragments")) == frags, rel
        # one fragment each (or none): its cells are the array's
        shown = [shown_cells(run("cat", str(inside / "fragments" / f / "cells.csv")).stdout)
                 for f in os.listdir(inside / "fragments")]
        assert sorted(v for cells in shown for v in cells) == values, rel
    assert len(tiledb_cells(top / "data")[1]) > 0
    res = run(*tdbfs_command(), "check", str(top))
    assert "warning" not in res.stdout and res.stdout.splitlines()[-1].startswith(f"{top}: group of 4 members, clean")


# -- 5. members added by absolute URI into the group's own folder ----------------------------------

def absolute_members_group(base: Path) -> Path:
    """A group whose members were added as tiledbsoma adds them: by absolute path, by `file://` URI,
    and one by relative URI; and a folder in it that no member is (the one stranger)."""
    g = base / "g"
    tiledb.Group.create(str(g))
    for name in ("by_path", "by_uri", "rel"):
        groups.small_array(g / name, "dense")
    groups.small_array(g / "stranger", "dense")
    with tiledb.Group(str(g), "w") as grp:
        grp.add(str(g / "by_path"), name="by_path", relative=False)
        grp.add("file://" + str(g / "by_uri"), name="by_uri", relative=False)
        grp.add("rel", name="rel", relative=True)
    return g


def test_members_added_by_absolute_uri_into_the_group_are_members_not_strangers(tmp_path):
    g = absolute_members_group(tmp_path)
    store = open_array(str(g))
    got = sorted((m.member.name, m.member.type_name, store.location(m.member)) for m in store.members())
    assert got == groups.oracle_members(g)
    assert {m.shown: m.member.relative for m in store.members()} == {"by_path": False, "by_uri": False, "rel": True}
    for name in ("by_path", "by_uri", "rel"):
        assert store.member_prefix(store.member(name)) == name
        assert type(store.member_store(name)) is ArrayStore
    (p,) = store.findings()
    assert (p.file, p.severity, p.message) == ("stranger", "warning", "folder present but not a member of the group")
    result = check_array(store)
    assert sorted(m.array for m in result.members) == ["by_path", "by_uri", "rel"]
    # the same group opened through a symlink to it: members named by the real path are still inside
    link = tmp_path / "link_to_g"
    os.symlink(g, link)
    via_link = open_array(str(link))
    assert [p.file for p in via_link.findings()] == ["stranger"]
    assert via_link.member_prefix(via_link.member("by_uri")) == "by_uri"


# -- 10 and 11: members outside the group's folder -------------------------------------------------

def outside_members_group(base: Path) -> dict:
    """base/pub/grp (0755): `own` inside; `secret` by absolute path and `climb` by '../../priv/...' to
    base/priv/secret_arr, in a 0700 folder; `through_link` by absolute path and `rel_link` by relative
    path through grp/link, a symlink to base/priv; `outside_link` by absolute path through base/alias,
    a symlink to base/priv outside the group."""
    pub, priv = base / "pub", base / "priv"
    grp = pub / "grp"
    pub.mkdir()
    priv.mkdir()
    tiledb.Group.create(str(grp))
    groups.small_array(grp / "own", "sparse")
    secret = groups.small_array(priv / "secret_arr", "sparse")
    os.symlink(priv, grp / "link")
    os.symlink(priv, base / "alias")
    with tiledb.Group(str(grp), "w") as g:
        g.add("own", name="own", relative=True)
        g.add(str(secret), name="secret", relative=False)
        g.add("../../priv/secret_arr", name="climb", relative=True)
        g.add(str(grp / "link" / "secret_arr"), name="through_link", relative=False)
        g.add("link/secret_arr", name="rel_link", relative=True)
        g.add(str(base / "alias" / "secret_arr"), name="outside_link", relative=False)
    os.chmod(priv, 0o700)
    return {"grp": grp, "secret": secret, "priv": priv}


def test_a_relative_member_climbing_out_is_a_warning_and_no_member_is_reached_through_a_symlink(tmp_path):
    built = outside_members_group(tmp_path)
    store = open_array(str(built["grp"]))
    assert store.member_store("secret").path == str(built["secret"])
    climb = store.member_store("climb")
    assert type(climb) is ArrayStore and climb.path == str(built["secret"])
    findings = store.findings()
    (warning,) = [p for p in findings if p.severity == "warning"]
    assert warning.structure == "group member 'climb'" and warning.offset == store.member("climb").member.offset
    assert warning.message.startswith(f"{built['secret']}: the relative URI '../../priv/secret_arr' climbs out")
    refused = {}
    for name in ("through_link", "rel_link", "outside_link"):
        with pytest.raises(MemberError) as info:
            store.member_store(name)
        refused[name] = info.value.problem.message
        assert info.value.problem in findings
    assert all("symbolic link (never followed" in m for m in refused.values()), refused
    assert refused["through_link"].startswith(str(built["grp"] / "link" / "secret_arr"))
    assert refused["outside_link"].startswith(str(tmp_path / "alias" / "secret_arr"))
    assert sorted(p.structure for p in findings if p.severity == "error") == [
        "group member 'outside_link'", "group member 'rel_link'", "group member 'through_link'"]


@pytest.fixture
def public_base():
    """A folder every user may walk into (pytest's are 0700), removed after the mounts on it are gone."""
    base = Path(tempfile.mkdtemp(prefix="tdbfs-members-", dir="/tmp"))
    os.chmod(base, 0o755)
    yield base
    if (base / "priv").exists():
        os.chmod(base / "priv", 0o755)
    shutil.rmtree(base, ignore_errors=True)


def test_members_outside_the_group_keep_their_own_folders_permissions_under_allow_other(public_base, mount):
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to read the mount as nobody")
    base = public_base
    built = outside_members_group(base)
    frag = sorted(os.listdir(built["secret"] / "__fragments"))[0]
    raw = sorted(os.listdir(built["secret"] / "__fragments" / frag))[0]
    assert run("ls", str(built["secret"]), user=NOBODY, check=False).returncode != 0   # nobody's own view
    mnt = mount(built["grp"], extra_args=["-o", "allow_other"])
    # the group's own files, and the member inside it, are nobody's to read
    assert "secret_arr" in run("cat", str(mnt / "group.yaml"), user=NOBODY).stdout
    assert "fragments" in run("cat", str(mnt / "members" / "own" / "array.yaml"), user=NOBODY).stdout
    assert run("ls", str(mnt / "members"), user=NOBODY).stdout.split() == [
        "climb", "outside_link", "own", "rel_link", "secret", "through_link"]
    assert os.stat(mnt / "members" / "own").st_mode & 0o777 == 0o555
    for name in ("secret", "climb"):
        member = mnt / "members" / name
        assert os.stat(member).st_mode & 0o777 == 0o500, name     # the 0700 folder's: its owner's only
        for path in (member / "array.yaml", member / "fragments" / frag / "cells.csv",
                     member / "fragments" / frag / "raw" / raw):
            res = run("cat", str(path), user=NOBODY, check=False)
            assert res.returncode != 0 and "Permission denied" in res.stderr and not res.stdout, (path, res)
        assert run("ls", str(member), user=NOBODY, check=False).returncode != 0
        # the mounting user still reads it all
        cells = run("cat", str(member / "fragments" / frag / "cells.csv")).stdout
        assert len(cells.splitlines()) == 1 + 5, name
        with open(member / "fragments" / frag / "raw" / raw, "rb") as f:
            assert f.read() == (built["secret"] / "__fragments" / frag / raw).read_bytes()
    # a member refused (a symlink on its way) shows only its problem, with the group's permissions
    shown = yaml.safe_load(run("cat", str(mnt / "members" / "through_link" / "problem.yaml"), user=NOBODY).stdout)
    assert "never followed" in shown["problem"]["message"]


def test_each_members_tree_carries_its_own_folders_bits_without_fuse(public_base):
    """The permission mirror's layers without a mount: the store gives each member's bits, the views
    make them a mask per path, and the FUSE adapter shows and checks them."""
    from tdbfs.mount.fuse_ops import TdbfsOperations
    from tdbfs.store.storage.local import access_mask
    from tdbfs.views.group_views import access_masks
    from tdbfs.views.tree import build_root

    built = outside_members_group(public_base)
    store = open_array(str(built["grp"]))
    root_mask = access_mask(str(built["grp"]))
    assert root_mask == 0o555 and store.member_access("secret")[1] == 0o500
    assert store.member_access("own")[1] == 0o555 and store.member_access("through_link") == (None, None)
    mask_at = access_masks(store, root_mask)
    assert [mask_at(p) for p in ("/", "/group.yaml", "/members", "/members/own/array.yaml", "/members/secret",
                                 "/members/climb/fragments", "/members/through_link/problem.yaml")] == [
        0o555, 0o555, 0o555, 0o555, 0o500, 0o500, 0o555]
    ops = TdbfsOperations(build_root(store), perm_mask=root_mask, mask_at=mask_at)
    modes = {p: ops.getattr(p)["st_mode"] & 0o777 for p in (
        "/group.yaml", "/members/own", "/members/own/array.yaml", "/members/secret", "/members/secret/array.yaml")}
    assert modes == {"/group.yaml": 0o444, "/members/own": 0o555, "/members/own/array.yaml": 0o444,
                     "/members/secret": 0o500, "/members/secret/array.yaml": 0o400}
    # the bits follow the folder: once others may reach it, they may read it through the group too
    os.chmod(built["priv"], 0o755)
    assert access_masks(store, root_mask)("/members/secret/array.yaml") == 0o555


def test_a_member_folder_swapped_for_a_symlink_after_opening_is_not_followed(tmp_path):
    """A member's folder is walked to, without following a symlink, on every read, not only when the
    member is first opened: one replaced by a symlink (to a copy of itself) reads as gone."""
    g = absolute_members_group(tmp_path)
    store = open_array(str(g))
    for name in ("rel", "by_path"):
        member = store.member_store(name)
        schema = member.storage.regular_names("__schema")[0]
        assert member.storage.read(f"__schema/{schema}") == (g / name / "__schema" / schema).read_bytes()
        os.rename(g / name, tmp_path / f"{name}_moved")
        os.symlink(tmp_path / f"{name}_moved", g / name)
        assert member.storage.entries("") == [] and member.storage.entry(f"__schema/{schema}") is None
        with pytest.raises(OSError, match="symbolic link"):
            member.storage.read(f"__schema/{schema}")
