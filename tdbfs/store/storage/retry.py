"""Requests to an object store, retried with backoff until a deadline, then one clear EIO.

A network failure or throttling mid-read must neither hang the daemon (one FUSE request would
block every other) nor fail at the first blip: each request is tried again after 0.1, 0.2, 0.4 ...
(at most 2) seconds, every attempt bounded by what is left of the deadline, and when the deadline
passes the caller gets a `RemoteIOError` (errno EIO) naming the URL and the byte range. Answers
that retrying cannot change (no such object or bucket, access denied) are raised at once.
"""

from __future__ import annotations

import asyncio
import errno
import time

__all__ = ["DEFAULT_TIMEOUT_S", "RemoteIOError", "retrying", "retrying_async"]

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


class _Deadline:
    """The attempts of one request: what is left of its deadline, and the pause before the next attempt."""

    def __init__(self, what: str, timeout_s: float):
        self.what, self.timeout_s = what, timeout_s
        self.start = time.monotonic()
        self.delay = _FIRST_DELAY_S
        self.attempts = 0

    def left(self) -> float:
        """Seconds the next attempt may take."""
        self.attempts += 1
        return max(self.timeout_s - (time.monotonic() - self.start), 0.001)

    def pause_after(self, exc: BaseException) -> float:
        """Seconds to wait before trying again after `exc`; RemoteIOError once the deadline has passed."""
        left = self.timeout_s - (time.monotonic() - self.start)
        if left <= _FIRST_DELAY_S:
            raise RemoteIOError(self.what, f"no answer within {self.timeout_s:g} s ({self.attempts} attempts; last: "
                                           f"{one_line(exc)})") from None
        pause = min(self.delay, left - _FIRST_DELAY_S)
        self.delay = min(self.delay * 2, _MAX_DELAY_S)
        return pause


def retrying(call, what: str, timeout_s: float):
    """call(seconds_left) until it answers; `what` (a URL and a byte range) names the request in the error.

    `call` must give up by itself once `seconds_left` have passed (fsspec's sync timeout does)."""
    deadline = _Deadline(what, timeout_s)
    while True:
        try:
            return call(deadline.left())
        except _FINAL:
            raise
        except Exception as exc:  # noqa: BLE001 -- a network, throttling or timeout error: tried again
            pause = deadline.pause_after(exc)
        time.sleep(pause)


async def retrying_async(call, what: str, timeout_s: float):
    """`retrying` on an event loop: await call(seconds_left), which gives up by itself as `call` above does."""
    deadline = _Deadline(what, timeout_s)
    while True:
        try:
            return await call(deadline.left())
        except _FINAL:
            raise
        except Exception as exc:  # noqa: BLE001 -- a network, throttling or timeout error: tried again
            pause = deadline.pause_after(exc)
        await asyncio.sleep(pause)


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
