"""systemd's readiness protocol for `tdbfs mount -f` in a `Type=notify` unit (sd_notify(3)): one
`READY=1` datagram to the AF_UNIX socket named by $NOTIFY_SOCKET once the mount answers."""

from __future__ import annotations

import logging
import os
import socket
import threading

log = logging.getLogger("tdbfs")


def notify(message: str) -> bool:
    """Send `message` to $NOTIFY_SOCKET; False when there is none or it cannot be reached.

    A name starting with '@' is an abstract socket (sd_notify(3)); `vsock:` addresses, used only
    by virtual machines' supervisors, are not supported."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if address.startswith("@"):
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8"))
    except OSError as exc:
        log.warning("cannot tell systemd %r on $NOTIFY_SOCKET: %s", message, exc.strerror)
        return False
    return True


def ready_once_answering(mountpoint: str):
    """An `on_init` hook for `fuse_ops.serve` that sends READY=1 once `mountpoint` answers, or None
    without $NOTIFY_SOCKET.

    `on_init` runs inside FUSE_INIT, before the loop answers anything, so a thread lists the mount
    point (which waits for the loop) and only then notifies: a unit ordered after this one never
    finds the mount point still empty."""
    if not os.environ.get("NOTIFY_SOCKET"):
        return None

    def wait_then_notify():
        try:
            os.listdir(mountpoint)
        except OSError as exc:
            log.warning("the mount does not answer (%s): systemd is not told it is ready", exc.strerror)
            return
        if notify(f"READY=1\nSTATUS=serving on {mountpoint}"):
            log.info("told systemd the mount is ready")

    def on_init():
        threading.Thread(target=wait_then_notify, name="sd-notify", daemon=True).start()

    return on_init
