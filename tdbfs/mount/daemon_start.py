"""How `tdbfs mount` starts its background daemon: a fork of itself, or a new interpreter where a fork would not do.

A fork starts the daemon where `tdbfs mount` already is: its interpreter up, `tdbfs.cli` imported and the
command line parsed. A new interpreter (`python -S -m tdbfs.cli mount -f --spawned ...`) spends 40-55 ms
getting back there, about a quarter of the time to a live mount (docs/performance.md §5). But a fork keeps
its parent's argv and environment in `/proc/PID/cmdline` and `/proc/PID/environ` for the life of the
mount: where the parent was given an encryption key (`--key-file`, TDBFS_ENCRYPTION_KEY, TDBFS_KEY_FILE)
or secret `-o` options, the daemon is a new interpreter, whose argv and environment hold none of them (the
secrets reach it through pipes). So it is where `tdbfs mount` is called in a process that runs other
threads (`main` called from a program): a fork would hold copies of their locks, which no thread releases.

Either way the daemon runs `tdbfs mount -f --spawned ...` through `main`, in a session of its own, in `/`,
with stdin and stdout on /dev/null and stderr on a pipe the parent reads until the mount is live.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def start(argv: list[str], pass_fds: tuple, *, fork: bool, run=None):
    """The daemon process running `tdbfs` with `argv`, keeping the descriptors `pass_fds` open: a
    ForkedDaemon, or a subprocess.Popen of a new interpreter. Both answer poll, wait, terminate and kill,
    and have the read end of the daemon's stderr as `stderr`. A fork runs `run(argv)`: the command
    line's `main`, which the caller hands in (the mount does not import the command line)."""
    if fork:
        return ForkedDaemon.start(argv, pass_fds, run)
    return subprocess.Popen([sys.executable, "-S", "-m", "tdbfs.cli", *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd="/",
                            env=daemon_env(), close_fds=True, pass_fds=pass_fds)


def daemon_env() -> dict:
    """A new interpreter's environment: this one's without the key variables (the key goes through a
    pipe), and this interpreter's module path in PYTHONPATH, so the daemon can start with `-S` (no
    site.py: ~12 ms less start-up, most of it the editable install's import hook) and still import
    what we import."""
    from ..frontend.keys import ENV_KEY, ENV_KEY_FILE

    env = {k: v for k, v in os.environ.items() if k not in (ENV_KEY, ENV_KEY_FILE)}
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above tdbfs/
    paths: list[str] = []
    for p in [pkg_parent] + env.get("PYTHONPATH", "").split(os.pathsep) + sys.path:
        if p and os.path.isabs(p) and p not in paths:
            paths.append(p)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class ForkedDaemon:
    """A daemon forked from this process, watched as subprocess.Popen watches its child."""

    def __init__(self, pid: int, stderr_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self.stderr = os.fdopen(stderr_fd, "rb", buffering=0)

    @classmethod
    def start(cls, argv: list[str], pass_fds: tuple, run) -> ForkedDaemon:
        # The caller forks only where this is the process's one thread (spawn_daemon), so the child
        # inherits no lock held by another thread. What is buffered for our stdout and stderr is
        # written now, or the child would write it a second time.
        read_fd, write_fd = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            pid = os.fork()
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid:
            os.close(write_fd)
            return cls(pid, read_fd)
        _run_child(argv, write_fd, pass_fds, run)   # never returns

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"tdbfs daemon (pid {self.pid})", timeout)
            time.sleep(0.01)
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass


def _run_child(argv: list[str], stderr_fd: int, pass_fds: tuple, run) -> None:
    """The forked daemon: detach as a new interpreter would be, run `run(argv)`, and end the process
    without returning into the parent's stack (whose callers would go on as the parent)."""
    code = 1
    try:
        os.setsid()
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(stderr_fd, 2)
        low = 3
        for fd in sorted(set(pass_fds)) + [os.sysconf("SC_OPEN_MAX")]:
            os.closerange(low, fd)   # the pipe's ends and everything else the parent had open
            low = fd + 1
        code = run(argv)
    except BaseException:  # noqa: BLE001 - main reports its own errors; anything else ends here, not in the parent
        try:
            import traceback
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)
