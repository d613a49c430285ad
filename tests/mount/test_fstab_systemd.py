"""Persistent mounts: an /etc/fstab line mounted by the real mount(8), the `mount.fuse.tdbfs` helper
called as libmount calls it, and systemd's `Type=notify` readiness (`READY=1` on $NOTIFY_SOCKET).

mount(8) drops PATH before it runs a helper, and Debian's mount.fuse3 then finds `tdbfs` (or
`mount.fuse.tdbfs`) in /bin/sh's default PATH, where `pip install tdbfs` puts it (/usr/local/bin).
To leave the machine as it is, those tests run in a private mount namespace (`unshare -m`) in which
/usr/local/sbin, on that default PATH, is a temporary folder holding links to this venv's scripts;
the FUSE mount lives and dies in that namespace.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mounting import is_mounted, tdbfs_command, unmount

VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount(8) with fstab lines and unshare -m need root")


def venv_script(name: str) -> Path:
    path = VENV_BIN / name
    assert path.is_file(), f"{path} is missing: install the package (pip install -e .) so its console scripts exist"
    return path


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(tdbfs_command() + [str(a) for a in args], capture_output=True, text=True, timeout=120)


def expected_views(array) -> dict:
    """What the mount must show, read without FUSE by `tdbfs ls` / `tdbfs cat`."""
    fragments = [line.rstrip("/") for line in cli("ls", array, "fragments").stdout.split()]
    assert fragments, "the test array has no fragment"
    footer = cli("cat", array, f"fragments/{fragments[0]}/footer.yaml")
    schema = cli("cat", array, "schema/current.yaml")
    assert footer.returncode == 0 and schema.returncode == 0, footer.stderr + schema.stderr
    return {"fragments": fragments, "footer": footer.stdout, "schema": schema.stdout}


def run_in_namespace(tmp_path: Path, links: dict, script: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`script` (sh -e) in a private mount namespace whose /usr/local/sbin holds `links` (name -> target).
    Whatever it mounts there is gone with the namespace, even if the script fails half way."""
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    for name, target in links.items():
        (sbin / name).symlink_to(target)
    full = f"mount --bind {sbin} /usr/local/sbin\n{script}"
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-ec", full],
                          capture_output=True, text=True, timeout=180, env=dict(os.environ, **(env or {})))


def read_back_script(mnt: Path, out: Path, first_fragment: str) -> str:
    """Read the mount with cat, ls and grep, as a person would, into files under `out`."""
    return (f"ls {mnt}/fragments > {out}/ls\n"
            f"cat {mnt}/fragments/{first_fragment}/footer.yaml > {out}/footer\n"
            f"cat {mnt}/schema/current.yaml > {out}/schema\n"
            f"grep ' {mnt} ' /proc/self/mountinfo > {out}/mountinfo\n"
            f"umount {mnt}\n"
            f"grep -c ' {mnt} ' /proc/self/mountinfo > {out}/after || true\n")


def assert_read_back(out: Path, expected: dict, array) -> list:
    assert (out / "ls").read_text().split() == expected["fragments"]
    assert (out / "footer").read_text() == expected["footer"]
    assert (out / "schema").read_text() == expected["schema"]
    fields = (out / "mountinfo").read_text().split()
    sep = fields.index("-")
    assert fields[sep + 1] == "fuse.tdbfs" and fields[sep + 2] == os.fspath(array), fields
    assert "ro" in fields[5].split(","), fields  # the mount's own flags
    assert (out / "after").read_text().strip() == "0", "umount left the mount in place"
    return fields[sep + 3].split(",")  # the super block's options


@pytest.fixture
def array(array_factory):
    return array_factory("sparse", name="arr").path


def test_fstab_line_mounted_by_mount_T_through_mount_fuse3(tmp_path, array):
    """`mount -T FSTAB MNT` with a `fuse.tdbfs` line: mount(8) runs mount.fuse3, which runs
    `tdbfs ARRAY MNT -o ...` with what is left of the options; fstab-only options are dropped."""
    expected = expected_views(array)
    mnt, out, log = tmp_path / "mnt", tmp_path / "out", tmp_path / "daemon.log"
    mnt.mkdir()
    out.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text("# a comment, and a line for something else\n"
                     "tmpfs /nowhere tmpfs noauto 0 0\n"
                     f"{array} {mnt} fuse.tdbfs ro,_netdev,allow_other,nofail,noauto,rw,noexec,"
                     f"x-systemd.automount,x-systemd.idle-timeout=60,cache_mb=64,log={log} 0 0\n")
    res = run_in_namespace(tmp_path, {"tdbfs": venv_script("tdbfs")},
                           f"mount -T {fstab} {mnt}\n" + read_back_script(mnt, out, expected["fragments"][0]))
    assert res.returncode == 0, res.stdout + res.stderr
    super_options = assert_read_back(out, expected, array)
    assert "allow_other" in super_options
    text = log.read_text()
    assert "tdbfs.fstab: mount options ignored: rw,noexec," in text  # mount.fuse3 already took _netdev, nofail
    assert "the mount is read-only whatever rw says" in text
    assert "(cache 64 MiB," in text
    assert not is_mounted(mnt)


def test_fstab_line_with_an_s3_url(tmp_path, array_factory):
    """The issue's own line, `s3://bucket/array MNT fuse.tdbfs ro,_netdev,allow_other 0 0`, with the endpoint
    as an fstab option and the keys in the environment mount(8) hands on."""
    pytest.importorskip("s3fs")
    from s3_server import S3Server

    server = S3Server.start()
    try:
        built = array_factory("sparse", name="for_s3")
        url = server.upload(built.path, "fstab/arr")
        local = server.download("fstab/arr", tmp_path / "copy")
        expected = expected_views(local)
        mnt, out = tmp_path / "mnt", tmp_path / "out"
        mnt.mkdir()
        out.mkdir()
        fstab = tmp_path / "fstab"
        fstab.write_text(f"{url} {mnt} fuse.tdbfs ro,_netdev,allow_other,s3.endpoint_url={server.endpoint} 0 0\n")
        env = {k: v for k, v in server.env.items() if k != "AWS_ENDPOINT_URL"}
        script = f"mount -T {fstab} {mnt}\n" + read_back_script(mnt, out, expected["fragments"][0])
        res = run_in_namespace(tmp_path, {"tdbfs": venv_script("tdbfs")}, script, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "allow_other" in assert_read_back(out, expected, url)
    finally:
        server.stop()


def test_fuse_type_with_helper_name_in_source(tmp_path, array):
    """The older fstab form `mount.fuse.tdbfs#ARRAY MNT fuse ...`: mount.fuse3 runs the console
    script `mount.fuse.tdbfs ARRAY MNT -o ...` itself."""
    expected = expected_views(array)
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    res = run_in_namespace(tmp_path, {"mount.fuse.tdbfs": venv_script("mount.fuse.tdbfs")},
                           f"mount -t fuse 'mount.fuse.tdbfs#{array}' {mnt} -o ro,allow_other,nodev,nosuid,users\n"
                           + read_back_script(mnt, out, expected["fragments"][0]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "allow_other" in assert_read_back(out, expected, array)


def test_helper_takes_the_arguments_libmount_passes(tmp_path, array):
    """/sbin/mount.fuse.tdbfs is run as `SOURCE MNT [-s] [-f] [-n] [-v] -o OPTS -t fuse.tdbfs`;
    its -f is mount(8)'s "fake", never "foreground"."""
    expected = expected_views(array)
    helper = venv_script("mount.fuse.tdbfs")
    mnt, log = tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()

    def run(*args):
        return subprocess.run([str(helper), *map(str, args)], capture_output=True, text=True, timeout=120)

    fake = run(array, mnt, "-f", "-o", "ro,allow_other", "-t", "fuse.tdbfs")
    assert fake.returncode == 0 and fake.stderr == "" and not is_mounted(mnt)

    res = run(array, mnt, "-s", "-n", "-v", "-o", f"rw,defaults,dev,suid,exec,auto,user,cache_mb=32,log={log}",
              "-o", "attr_timeout=1", "-t", "fuse.tdbfs")
    try:
        assert res.returncode == 0, res.stderr
        assert res.stderr == ""  # rw is said only in the log
        assert is_mounted(mnt)
        fragments = subprocess.run(["ls", mnt / "fragments"], capture_output=True, text=True, timeout=60).stdout
        assert fragments.split() == expected["fragments"]
        footer = subprocess.run(["cat", mnt / "fragments" / expected["fragments"][0] / "footer.yaml"],
                                capture_output=True, text=True, timeout=60)
        assert footer.stdout == expected["footer"]
        text = log.read_text()
        assert "mount options ignored: rw,defaults,dev,suid,exec,auto,user (tdbfs is read-only" in text
        assert "(cache 32 MiB," in text and "attr_timeout=1" in text
    finally:
        unmount(mnt)
    assert not is_mounted(mnt)


def test_helper_failures_use_mount8_exit_statuses(tmp_path):
    helper = venv_script("mount.fuse.tdbfs")
    mnt = tmp_path / "mnt"
    mnt.mkdir()

    def run(*args):
        return subprocess.run([str(helper), *map(str, args)], capture_output=True, text=True, timeout=120)

    missing = run(tmp_path / "no_such_array", mnt, "-o", "ro")
    assert missing.returncode == 32  # mount(8): mount failure
    assert missing.stderr.splitlines() == [f"tdbfs: error: array not found: {tmp_path / 'no_such_array'}"]
    usage = run(tmp_path)
    assert usage.returncode == 1  # mount(8): incorrect invocation
    assert usage.stderr.splitlines() == ["tdbfs: error: usage: mount.fuse.tdbfs SOURCE MOUNTPOINT [-o OPT[,OPT...]]"]
    other = run(tmp_path, mnt, "-t", "fuse.sshfs")
    assert other.returncode == 1 and "not fuse.sshfs" in other.stderr
    no_value = run(tmp_path, mnt, "-o", "cache_mb=")
    assert no_value.returncode == 1 and "'cache_mb' needs a value" in no_value.stderr
    assert not is_mounted(mnt)


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_foreground_mount_tells_systemd_it_is_ready(tmp_path, array, abstract):
    """A `Type=notify` unit runs `tdbfs mount -f`; systemd waits for READY=1 on its socket. When it
    arrives the mount must already answer."""
    expected = expected_views(array)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"tdbfs-test-notify-{os.getpid()}-{time.monotonic_ns()}"
        sock.bind("\0" + name)
        notify_socket = "@" + name
    else:
        notify_socket = str(tmp_path / "notify.sock")
        sock.bind(notify_socket)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # as systemd does, to check the sender
    sock.settimeout(60)
    env = dict(os.environ, NOTIFY_SOCKET=notify_socket)
    proc = subprocess.Popen(tdbfs_command() + ["mount", "-f", os.fspath(array), os.fspath(mnt)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        message, ancillary, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12))
        (level, kind, creds), = ancillary
        assert (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS)
        # from the process systemd started (NotifyAccess=main), not from a child
        assert struct.unpack("iII", creds)[0] == proc.pid
        fields = dict(line.split("=", 1) for line in message.decode().splitlines())
        assert fields["READY"] == "1"
        assert fields["STATUS"] == f"serving on {mnt}"
        assert is_mounted(mnt)
        assert sorted(os.listdir(mnt / "fragments")) == sorted(expected["fragments"])
        assert (mnt / "schema" / "current.yaml").read_text() == expected["schema"]
        sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            sock.recv(4096)  # exactly one READY=1
        proc.send_signal(signal.SIGTERM)  # systemctl stop
        assert proc.wait(timeout=60) == 0
        assert not is_mounted(mnt)
    finally:
        sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if is_mounted(mnt):
            unmount(mnt)


def test_background_mount_does_not_notify(tmp_path, array):
    """Only the process systemd started may say READY=1: `tdbfs mount` without -f returns once the
    mount answers, and neither it nor its daemon writes to the socket."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(1.0)
    try:
        res = subprocess.run(tdbfs_command() + ["mount", os.fspath(array), os.fspath(mnt)], capture_output=True,
                             text=True, timeout=120, env=dict(os.environ, NOTIFY_SOCKET=str(path)))
        assert res.returncode == 0, res.stderr
        assert "array.yaml" in os.listdir(mnt)
        with pytest.raises(socket.timeout):
            sock.recv(4096)
    finally:
        sock.close()
        unmount(mnt)
    assert not is_mounted(mnt)


def test_no_notify_socket_no_message(tmp_path, array):
    """Without $NOTIFY_SOCKET (a plain `tdbfs mount -f` in a terminal) nothing is sent and the log
    says nothing about systemd."""
    mnt, log = tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    proc = subprocess.Popen(tdbfs_command() + ["mount", "-f", "--log", os.fspath(log), os.fspath(array),
                                               os.fspath(mnt)], stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (is_mounted(mnt) and "array.yaml" in os.listdir(mnt)):
            assert time.monotonic() < deadline and proc.poll() is None, "the mount never answered"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        text = log.read_text()
        assert "serving" in text and "systemd" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if is_mounted(mnt):
            unmount(mnt)

