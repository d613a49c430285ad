"""Running a command whose stderr is a pseudo-terminal, as a user's shell would give it (progress bars)."""

from __future__ import annotations

import os
import pty
import subprocess


def run_with_terminal_stderr(cmd, timeout: float, **popen) -> tuple[subprocess.CompletedProcess, bytes]:
    """(the finished process with its stdout, everything it wrote to the terminal on stderr); `popen`: more
    of subprocess.run's arguments (env, stdin)."""
    master, slave = pty.openpty()
    try:
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=slave, timeout=timeout, **popen)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:   # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    return res, seen
