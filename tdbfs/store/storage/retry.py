"""Requests to an object store, retried with backoff until a deadline, then one clear EIO.

A network failure or throttling mid-read must neither hang the daemon (one FUSE request would
block every other) nor fail at the first blip: each request is tried again after 0.1, 0.2, 0.4 ...
(at most 2) seconds, every attempt bounded by what is left of the deadline, and when the deadline
passes the caller gets a `RemoteIOError` (errno EIO) naming the URL and the byte range. Answers
that retrying cannot change (no such object or bucket, access denied) are raised at once.
"""

from __future__ import annotations

import errno
import time

__all__ = ["DEFAULT_TIMEOUT_S", "RemoteIOError", "retrying"]

#: seconds a request may take, all attempts together (`-o timeout=S`)
DEFAULT_TIMEOUT_S = 30.0

_FIRST_DELAY_S = 0.1
_MAX_DELAY_S = 2.0

#: answers retrying cannot change: the object store said so, it did not fail to say
_FINAL = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, ValueError, TypeError,
          AttributeError, KeyError, ImportError)


class RemoteIOError(OSError):
    """A request that got no answer within the deadline: EIO, naming what was asked for."""

    def __init__(self, what: str, message: str):
        super().__init__(errno.EIO, f"{what}: {message}")
        self.what = what


def retrying(call, what: str, timeout_s: float):
    """call(seconds_left) until it answers; `what` (a URL and a byte range) names the request in the error.

    `call` must give up by itself once `seconds_left` have passed (fsspec's sync timeout does)."""
    start = time.monotonic()
    delay = _FIRST_DELAY_S
    attempts = 0
    while True:
        attempts += 1
        left = timeout_s - (time.monotonic() - start)
        try:
            return call(max(left, 0.001))
        except _FINAL:
            raise
        except Exception as exc:  # noqa: BLE001 -- a network, throttling or timeout error: tried again
            last = exc
        left = timeout_s - (time.monotonic() - start)
        if left <= _FIRST_DELAY_S:
            raise RemoteIOError(what, f"no answer within {timeout_s:g} s ({attempts} attempts; last: "
                                      f"{one_line(last)})") from None
        time.sleep(min(delay, left - _FIRST_DELAY_S))
        delay = min(delay * 2, _MAX_DELAY_S)


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
