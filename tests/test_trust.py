"""What a user must be able to trust of a live mount (real arrays from tiledb-py, real FUSE mounts):

a. a tile that reads as EIO puts its problem in fragment.yaml at once: the next read of
   fragment.yaml is complete, current YAML (100 times, on fresh mounts and fresh damaged tiles);
b. fragments written while mounted appear, and one read while it was being written is not left
   broken once it is committed: its tiles equal TileDB's reads (tiledb-py writing in a thread while
   another polls; and a fragment copied in file by file, read after every step);
c. with `-o allow_other`, symlinks out of the array expose nothing: an unprivileged user (and root)
   walking and reading the whole mount never sees a byte of the files outside it, and tdbfs never
   opens them;
d. a FIFO in place of a data file hangs nothing: `cat array.yaml` and `tdbfs check` return within
   seconds and name it, and nothing opens it.

Every operation on the mount runs with a timeout (damage.read_view / damage.walk_mount), and every
mount is removed at teardown (damage.mount_tracked), its daemon stopped if it outlives the unmount.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import arrays
import damage
import reference
from damage import SECRET, mount_tracked, read_view

NOBODY = (65534, 65534)


def _load(data: bytes, what: str):
    try:
        return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise AssertionError(f"{what} does not parse as YAML: {exc}\n--- its bytes:\n"
                             f"{data.decode('utf-8', 'replace')[-1500:]}") from None


def _view(path: Path) -> bytes:
    """A view that must read: its bytes, with st_size == fstat size == bytes read."""
    data, err, st, fst = read_view(path)
    assert err is None, f"{path}: {os.strerror(err)} (errno {err})"
    assert st == fst == len(data), f"{path}: stat says {st}, fstat {fst}, read {len(data)} bytes"
    return data


# ------------------------------------------------------------------------------------------------
# a. EIO then fragment.yaml, 100 times

def _damage_every_tile(array: Path, stems=("a0", "a2")) -> list[tuple[str, str, int, int, int]]:
    """Flip the first byte of the compressed data (the ZSTD frame's magic number) of every tile of
    the given fixed-size attributes in every fragment: each such tile now reads as EIO.
    Returns (fragment, stem, tile index, tile start, tile end) per damaged tile."""
    out = []
    for frag in sorted((array / "__fragments").iterdir()):
        for stem in stems:
            path = frag / f"{stem}.tdb"
            data = bytearray(path.read_bytes())
            lay = damage.layout(bytes(data), "data")
            assert lay.tiles, f"no tiles found in {path}"
            for k, (start, end, _label) in enumerate(lay.tiles):
                chunk = next(c for c in lay.chunks if start <= c[0] < end)
                assert data[chunk[0]:chunk[0] + 4] == b"\x28\xb5\x2f\xfd", f"{path} tile {k}: not a ZSTD frame"
                data[chunk[0]] ^= 0xFF
                out.append((frag.name, stem, k, start, end))
            path.write_bytes(bytes(data))
    return out


def test_eio_then_fragment_yaml_is_complete_and_current(tmp_path):
    base = arrays.make_array(tmp_path / "base", "dense", ndim=2, extent=2, tiles_per_dim=4, filters="ZSTD").path
    iterations = 0
    copy = 0
    failures: list[str] = []
    while iterations < 100:
        copy += 1
        array = tmp_path / f"copy{copy}"
        shutil.copytree(base, array, symlinks=True)
        tiles = _damage_every_tile(array)
        order = np.random.default_rng(copy).permutation(len(tiles))
        with mount_tracked(array) as mnt:
            for i in order:
                if iterations >= 100:
                    break
                iterations += 1
                frag, stem, k, start, end = tiles[i]
                rel = f"__fragments/{frag}/{stem}.tdb"
                tile_view = mnt / "fragments" / frag / "attrs" / stem / f"tile_{k}.bin"
                data, err, _st, _fst = read_view(tile_view)
                where = f"iteration {iterations} (copy {copy}): {tile_view.relative_to(mnt)}"
                if err != 5:
                    failures.append(f"{where}: expected EIO (its ZSTD frame is broken), got "
                                    f"{'bytes' if err is None else os.strerror(err)}")
                    continue
                # immediately: fragment.yaml
                fy = mnt / "fragments" / frag / "fragment.yaml"
                ydata, yerr, st, fst = read_view(fy)
                if yerr is not None:
                    failures.append(f"{where}: then fragment.yaml: {os.strerror(yerr)}")
                    continue
                if not (st == fst == len(ydata)):
                    failures.append(f"{where}: then fragment.yaml: stat {st}, fstat {fst}, read {len(ydata)} bytes")
                if not ydata.endswith(b"\n"):
                    failures.append(f"{where}: then fragment.yaml does not end with a newline (cut?): "
                                    f"...{ydata[-80:]!r}")
                try:
                    doc = _load(ydata, "fragment.yaml")
                except AssertionError as exc:
                    failures.append(f"{where}: then {exc}")
                    continue
                probs = doc.get("problems") if isinstance(doc, dict) else None
                if not isinstance(probs, list):
                    failures.append(f"{where}: then fragment.yaml has no problems list: {str(doc)[:300]}")
                    continue
                hit = [p for p in probs if isinstance(p, dict) and p.get("file") == rel
                       and isinstance(p.get("offset"), int) and start <= p["offset"] < end]
                if not hit:
                    failures.append(f"{where}: then fragment.yaml has no problem in {rel} at an offset in "
                                    f"[{start}, {end}) (tile {k}); its problems: "
                                    f"{[damage.fmt(p) for p in probs if isinstance(p, dict)][-6:]}")
                for p in hit:
                    why = damage.bad_problem(p)
                    if why:
                        failures.append(f"{where}: problem {p}: {why}")
    assert iterations == 100
    assert not failures, f"{len(failures)} of 100 iterations failed:\n" + "\n".join(failures[:25])


# ------------------------------------------------------------------------------------------------
# b. fragments written while mounted

ATTRS = arrays.attr_profile("default")
DIMS = arrays._dims_for(1, "int")


def _write(built, clock, seed: int) -> None:
    arrays._write_sparse(built, clock, ATTRS, arrays.sparse_coords(DIMS, 7, seed), seed)


def _compare_with_tiledb(mnt: Path, array: Path, name: str) -> list[str]:
    """Mismatches between the fragment's views and TileDB's read of that fragment alone."""
    errs: list[str] = []
    base = mnt / "fragments" / name
    frag = _load(_view(base / "fragment.yaml"), f"fragments/{name}/fragment.yaml")
    if frag.get("problems"):
        errs.append(f"{name}: fragment.yaml still lists problems after the commit: "
                    f"{[damage.fmt(p) for p in frag['problems'] if isinstance(p, dict)][:4]}")
    if frag.get("committed") is not True:
        errs.append(f"{name}: fragment.yaml says committed: {frag.get('committed')!r}")
    info = reference.fragment_info(array, name)
    if frag.get("cell_count") != info.cell_num or frag.get("tile_count") != info.tile_num:
        errs.append(f"{name}: cell/tile count {frag.get('cell_count')}/{frag.get('tile_count')}, "
                    f"TileDB {info.cell_num}/{info.tile_num}")
    cells = reference.fragment_cells(array, name)
    for stem, field_name in (frag.get("fields") or {}).items():
        if field_name not in cells:
            continue
        ref = cells[field_name]
        folder = base / ("dims" if ref.role == "dim" else "attrs") / stem
        n = info.tile_num
        try:
            if ref.var:
                got = []
                for k in range(n):
                    offs = np.frombuffer(_view(folder / f"tile_{k}.bin"), "<u8")
                    vals = _view(folder / f"tile_{k}.var.bin")
                    ends = list(offs[1:]) + [len(vals)]
                    got += [vals[int(s):int(e)] for s, e in zip(offs, ends)]
                valid = ref.validity.astype(bool) if ref.nullable and ref.validity is not None else \
                    np.ones(len(ref), bool)
                if len(got) != len(ref) or any(got[i] != ref.cells[i] for i in np.flatnonzero(valid)):
                    errs.append(f"{name}/{stem}: var cells differ from TileDB's read: {got[:5]} vs {ref.cells[:5]}")
            else:
                got = b"".join(_view(folder / f"tile_{k}.bin") for k in range(n))
                want = ref.fixed_bytes()
                if ref.nullable and ref.validity is not None:
                    g = np.frombuffer(got, np.uint8).reshape(len(ref), -1) if len(got) == len(want) else None
                    w = np.frombuffer(want, np.uint8).reshape(len(ref), -1)
                    keep = ref.validity.astype(bool)
                    if g is None or not np.array_equal(g[keep], w[keep]):
                        errs.append(f"{name}/{stem}: tiles differ from TileDB's read")
                elif got != want:
                    errs.append(f"{name}/{stem}: tiles differ from TileDB's read ({len(got)} vs {len(want)} bytes)")
            if ref.nullable and ref.validity is not None:
                gv = np.frombuffer(b"".join(_view(folder / f"tile_{k}.validity.bin") for k in range(n)), np.uint8)
                if not np.array_equal(gv != 0, ref.validity.astype(bool)):
                    errs.append(f"{name}/{stem}: validity differs from TileDB's read")
        except AssertionError as exc:
            errs.append(f"{name}/{stem}: {exc}")
    return errs


def _poll_failures(outcome: damage.WalkOutcome, label: str) -> list[str]:
    out = []
    if outcome.hung:
        out.append(f"{label}: hung at {outcome.hung}")
    elif outcome.crashed:
        out.append(f"{label}: walker crashed: {outcome.crashed}")
    r = outcome.result or {}
    for op, rel, code, msg in r.get("errors", []):
        if code not in ("EIO", "ENOENT"):
            out.append(f"{label}: {op} {rel}: {code} ({msg}); only EIO or ENOENT while a fragment is written")
    for rel, st, fst, n in r.get("size_mismatch", []):
        out.append(f"{label}: {rel}: stat {st}, fstat {fst}, read {n} bytes")
    for rel, what, msg in r.get("parse", []):
        out.append(f"{label}: {rel}: does not parse as {what}: {msg}")
    return out


def test_fragments_written_while_mounted_appear_and_match_tiledb(tmp_path):
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=7, capacity=3, n_fragments=1)
    array = built.path
    clock = arrays.Clock()
    clock.last = max(op.timestamp for op in built.ops if op.timestamp)
    n_writes = 12
    problems: list[str] = []
    with mount_tracked(array) as mnt:
        done = threading.Event()
        errors: list[BaseException] = []
        # The writer waits for a poll round to finish after each commit, so the reads overlap the
        # writes however slow the machine is (a cold first round can outlast all twelve writes).
        polled = threading.Condition()
        finished = 0

        def writer():
            try:
                for seed in range(2, 2 + n_writes):
                    _write(built, clock, seed)
                    with polled:
                        seen = finished
                        polled.wait_for(lambda: finished > seen or poller_gone, timeout=30)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                done.set()

        rounds = 0
        poller_gone = False

        def poller():
            nonlocal rounds, finished, poller_gone
            try:
                while not done.is_set():
                    rounds += 1
                    poll(rounds)
                    with polled:
                        finished += 1
                        polled.notify_all()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                with polled:  # a poller that failed must not leave the writer waiting
                    poller_gone = True
                    polled.notify_all()

        def poll(n):
            try:
                names = sorted(os.listdir(mnt / "fragments"))
            except OSError as exc:
                problems.append(f"poll {n}: ls fragments/: {exc}")
                return
            # the newest fragments: the ones being written
            for name in names[-2:]:
                problems.extend(_poll_failures(damage.walk_mount(mnt, sub=f"fragments/{name}"),
                                               f"poll {n}, fragments/{name}"))

        tw = threading.Thread(target=writer)
        tp = threading.Thread(target=poller)
        tw.start()
        tp.start()
        tw.join(120)
        tp.join(120)
        assert not tw.is_alive() and not tp.is_alive(), "writer or poller still running after 120 s"
        assert not errors, f"tiledb-py writes or the poller failed: {errors}"
        assert rounds >= n_writes, f"the poller made {rounds} rounds during {n_writes} writes"

        # after the commits, on the same mount
        names = reference.list_fragments(array)
        assert len(names) == 1 + n_writes
        listed = sorted(os.listdir(mnt / "fragments"))
        assert listed == sorted(names), f"fragments/ lists {len(listed)}, the array has {len(names)}"
        for name in names:
            problems.extend(_compare_with_tiledb(mnt, array, name))
        full = damage.walk_mount(mnt)
        problems.extend(_poll_failures(full, "full walk after the writes"))
        if full.result:
            problems += [f"full walk after the writes: EIO on {rel}" for _op, rel in full.result["eio"]]
    assert not problems, "\n".join(problems[:30])


def test_fragment_copied_in_file_by_file_is_whole_after_its_commit(tmp_path):
    """A writer's steps, made deterministic: the new fragment's files appear one at a time (each
    first half-written), then __fragment_metadata.tdb, then the commit. The views are read after
    every step (any of EIO/ENOENT allowed then); after the commit every view is right."""
    built = arrays.make_array(tmp_path, "sparse", ndim=1, cells=7, capacity=3, n_fragments=1)
    array = built.path
    scratch = tmp_path / "scratch"
    shutil.copytree(array, scratch, symlinks=True)
    side = arrays.BuiltArray(scratch, "sparse", {})
    clock = arrays.Clock()
    clock.last = max(op.timestamp for op in built.ops if op.timestamp)
    _write(side, clock, 5)
    new = sorted(set(reference.list_fragments(scratch)) - set(reference.list_fragments(array)))
    assert len(new) == 1
    name = new[0]
    src = scratch / "__fragments" / name
    dst = array / "__fragments" / name
    files = sorted(p.name for p in src.iterdir())
    files.remove("__fragment_metadata.tdb")
    steps = []
    seen_at: list[str] = []
    problems: list[str] = []
    with mount_tracked(array) as mnt:
        def look(label):
            steps.append(label)
            try:
                listed = os.listdir(mnt / "fragments")
            except OSError as exc:
                problems.append(f"after {label}: ls fragments/: {exc}")
                return
            if name in listed:
                seen_at.append(label)
                problems.extend(_poll_failures(damage.walk_mount(mnt, sub=f"fragments/{name}"), f"after {label}"))
            data, err, st, fst = read_view(mnt / "array.yaml")
            if err is not None:
                problems.append(f"after {label}: array.yaml: {os.strerror(err)}")
            elif not st == fst == len(data):
                problems.append(f"after {label}: array.yaml: stat {st}, fstat {fst}, read {len(data)}")

        dst.mkdir()
        look("mkdir")
        for f in files + ["__fragment_metadata.tdb"]:
            data = (src / f).read_bytes()
            (dst / f).write_bytes(data[:len(data) // 2])
            look(f"half of {f}")
            (dst / f).write_bytes(data)
            look(f"all of {f}")
        shutil.copy2(scratch / "__commits" / f"{name}.wrt", array / "__commits" / f"{name}.wrt")
        # committed: the same mount, no remount
        assert name in os.listdir(mnt / "fragments")
        problems.extend(_compare_with_tiledb(mnt, array, name))
        full = damage.walk_mount(mnt)
        problems.extend(_poll_failures(full, "full walk after the commit"))
        if full.result:
            problems += [f"full walk after the commit: EIO on {rel}" for _op, rel in full.result["eio"]]
            probs, why = damage.problems_of(full.result["final"].get("array.yaml"))
            assert probs is not None, f"array.yaml after the commit: {why}"
            errs = [damage.fmt(p) for p in probs if isinstance(p, dict) and p.get("severity") == "error"]
            if errs:
                problems.append(f"array.yaml after the commit still lists errors: {errs[:5]}")
    assert len(steps) == 1 + 2 * (len(files) + 1)
    # the uncommitted fragment is shown (and so read) while it is being written
    assert "all of __fragment_metadata.tdb" in seen_at, f"fragments/ listed {name} only after: {seen_at}"
    assert not problems, "\n".join(problems[:30])


# ------------------------------------------------------------------------------------------------
# c. allow_other, symlinks out of the array, an unprivileged reader

@pytest.fixture
def public_dir():
    d = Path(tempfile.mkdtemp(prefix="tdbfs-trust-", dir="/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as_nobody(cmd: list[str], timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={NOBODY[0]}", f"--regid={NOBODY[1]}", "--clear-groups", *cmd],
                          capture_output=True, timeout=timeout, cwd="/")


def _walk_failures(outcome: damage.WalkOutcome, who: str) -> list[str]:
    out = []
    if outcome.hung:
        out.append(f"{who}: hung at {outcome.hung}")
    if outcome.crashed:
        out.append(f"{who}: walker crashed: {outcome.crashed}")
    r = outcome.result
    if r is None:
        return out + [f"{who}: no walk result"]
    for rel, where in r["secret"]:
        out.append(f"{who}: the outside marker is readable in {rel} (at {where})")
    for op, rel, code, msg in r["errors"]:
        if code not in ("EIO", "ENOENT"):
            out.append(f"{who}: {op} {rel}: {code} ({msg})")
    for rel, st, fst, n in r["size_mismatch"]:
        out.append(f"{who}: {rel}: stat {st}, fstat {fst}, read {n} bytes")
    if r["files"] < 100:
        out.append(f"{who}: only {r['files']} files read: the mount is not usable by this user")
    return out


def test_allow_other_symlinks_out_of_the_array_expose_nothing(tmp_path, public_dir):
    src = arrays.make_array(tmp_path, "sparse", ndim=2, n_fragments=3).path
    array = public_dir / "array"
    shutil.copytree(src, array, symlinks=True)
    frags = sorted(p.name for p in (array / "__fragments").iterdir())
    # root-only secrets
    secret_dir = public_dir / "secret"
    secret_dir.mkdir(mode=0o700)
    secret = secret_dir / "secret.txt"
    secret.write_text((SECRET + "\n") * 100)
    os.chmod(secret, 0o600)
    folder = secret_dir / "fragment"
    shutil.copytree(array / "__fragments" / frags[0], folder)
    for f in folder.iterdir():
        if f.name != "__fragment_metadata.tdb":
            f.write_text((SECRET + "\n") * 100)
    (folder / f"{SECRET}.tdb").write_text(SECRET)
    for p in [folder, *folder.iterdir()]:
        os.chmod(p, 0o700 if p.is_dir() else 0o600)
    # the array: a fragment folder and a data file replaced by symlinks to them, and an extra
    # fragment-named symlink to the secret folder
    shutil.rmtree(array / "__fragments" / frags[0])
    os.symlink(folder, array / "__fragments" / frags[0])
    os.remove(array / "__fragments" / frags[1] / "a0.tdb")
    os.symlink(secret, array / "__fragments" / frags[1] / "a0.tdb")
    os.symlink(secret, array / "__fragments" / frags[1] / "a1_var.tdb.link")
    for dirpath, dirnames, filenames in os.walk(array, followlinks=False):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755)
    symlinks = [f"__fragments/{frags[0]}", f"__fragments/{frags[1]}/a0.tdb", f"__fragments/{frags[1]}/a1_var.tdb.link"]

    # the setup is meaningful: nobody cannot read the secret directly
    direct = _as_nobody(["cat", str(secret)])
    assert direct.returncode != 0 and SECRET.encode() not in direct.stdout, "nobody can read the secret directly"

    before = damage.safe_snapshot(public_dir)
    watch = damage.OpenWatch(damage.watch_targets(array, secret_dir))
    failures: list[str] = []
    try:
        with mount_tracked(array, extra_args=["-o", "allow_other"]) as mnt:
            ls = _as_nobody(["ls", str(mnt)])
            assert ls.returncode == 0 and b"array.yaml" in ls.stdout, \
                f"allow_other: nobody cannot list the mount: {ls.stderr!r}"
            as_nobody = damage.walk_mount(mnt, user=NOBODY)
            failures += _walk_failures(as_nobody, "as nobody")
            as_root = damage.walk_mount(mnt)
            failures += _walk_failures(as_root, "as root")
            # and the symlinks are findings
            if as_root.result:
                probs, why = damage.problems_of(as_root.result["final"].get("array.yaml"))
                assert probs is not None, f"array.yaml: {why}"
                for rel in symlinks:
                    if not any(isinstance(p, dict) and (p.get("file") == rel or
                               str(p.get("file", "")).startswith(rel + "/")) for p in probs):
                        failures.append(f"array.yaml names no problem for the symlink {rel}: "
                                        f"{[damage.fmt(p) for p in probs if isinstance(p, dict)][:6]}")
        opened = watch.events()
    finally:
        watch.close()
    if opened:
        failures.append(f"files outside the array were opened or read through the symlinks: {sorted(set(opened))[:6]}")
    diff = damage.diff_snapshots(before, damage.safe_snapshot(public_dir))
    if diff:
        failures.append(f"the array or the secrets changed: {diff[:6]}")
    assert not failures, "\n".join(failures[:30])


# ------------------------------------------------------------------------------------------------
# d. a FIFO in place of a0.tdb

def test_fifo_in_place_of_a_data_file_hangs_nothing(tmp_path):
    src = arrays.make_array(tmp_path / "base", "sparse", ndim=2).path
    array = tmp_path / "array"
    shutil.copytree(src, array, symlinks=True)
    frag = sorted(p.name for p in (array / "__fragments").iterdir())[0]
    rel = f"__fragments/{frag}/a0.tdb"
    os.remove(array / rel)
    os.mkfifo(array / rel)
    before = damage.safe_snapshot(array)
    watch = damage.OpenWatch([array / rel])
    failures: list[str] = []
    try:
        with mount_tracked(array) as mnt:
            t0 = time.monotonic()
            try:
                cat = subprocess.run(["cat", str(mnt / "array.yaml")], capture_output=True, timeout=10)
            except subprocess.TimeoutExpired:
                pytest.fail("`cat array.yaml` did not return within 10 s with a FIFO in the array")
            took = time.monotonic() - t0
            assert cat.returncode == 0, f"cat array.yaml: {cat.stderr!r}"
            if took > 5:
                failures.append(f"cat array.yaml took {took:.1f} s")
            probs, why = damage.problems_of(cat.stdout.decode())
            assert probs is not None, f"array.yaml: {why}"
            if not any(isinstance(p, dict) and p.get("file") == rel for p in probs):
                failures.append(f"array.yaml (first read) names no problem with file {rel}: "
                                f"{[damage.fmt(p) for p in probs if isinstance(p, dict)][:6]}")
            fdata = _view(mnt / "fragments" / frag / "fragment.yaml")
            fprobs, why = damage.problems_of(fdata.decode())
            if fprobs is None or not any(isinstance(p, dict) and p.get("file") == rel for p in fprobs):
                failures.append(f"fragment.yaml names no problem with file {rel}: {why or fprobs}")
            walk = damage.walk_mount(mnt, sub=f"fragments/{frag}")
            if walk.hung:
                failures.append(f"walking fragments/{frag} hung at {walk.hung}")
            elif walk.result:
                bad = [e for e in walk.result["errors"] if e[2] not in ("EIO", "ENOENT")]
                if bad:
                    failures.append(f"errors other than EIO/ENOENT: {bad[:5]}")
        doc, err, secs = damage.run_check(array, timeout=30)
        assert err is None, f"tdbfs check --json: {err}"
        if secs > 10:
            failures.append(f"tdbfs check took {secs:.1f} s")
        if not any(p.get("file") == rel for p in doc["problems"]):
            failures.append(f"tdbfs check names no problem with file {rel}: "
                            f"{[damage.fmt(p) for p in doc['problems']][:6]}")
        opened = watch.events()
    finally:
        watch.close()
    if opened:
        failures.append(f"the FIFO was opened or read: {opened[:4]}")
    diff = damage.diff_snapshots(before, damage.safe_snapshot(array))
    if diff:
        failures.append(f"the array changed: {diff[:6]}")
    assert stat.S_ISFIFO(os.lstat(array / rel).st_mode)
    assert not failures, "\n".join(failures)
