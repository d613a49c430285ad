"""`mount.fuse.tdbfs SOURCE MOUNTPOINT [-o OPTS]`: the helper mount(8) runs for an fstab line of type
`fuse.tdbfs`, turned into `tdbfs mount`.

Two routes reach it. mount(8) runs `/sbin/mount.fuse.tdbfs SOURCE MNT [-n] [-s] [-f] [-v] [-o OPTS]
[-t TYPE]` when that file exists (util-linux libmount, `exec_helper`). Otherwise it runs Debian's
`mount.fuse3`, which drops `user,users,nouser,auto,noauto,_netdev,nofail`, appends `dev,suid`, and
runs `tdbfs SOURCE MNT -o OPTS` from PATH (libfuse `util/mount.fuse.c`): `tdbfs`'s `main` hands such
a call here (`main.is_helper_call`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field


#: fstab options meant for mount(8), systemd or the kernel's generic flags rather than for tdbfs.
#: The mount is read-only, never holds devices or set-user-ID files and is FUSE's nodev,nosuid by
#: default, so none of them changes what tdbfs serves.
IGNORED = frozenset({"", "defaults", "ro", "rw", "dev", "nodev", "suid", "nosuid", "exec", "noexec",
                     "auto", "noauto", "user", "users", "nouser", "owner", "group", "_netdev", "nofail"})
IGNORED_PREFIXES = ("x-", "comment=")

#: tdbfs options an fstab line can only give as `-o NAME=VALUE`, and the `tdbfs mount` option each becomes
TDBFS_OPTIONS = {"cache_mb": "--cache-mb", "log": "--log", "key_file": "--key-file"}

#: mount(8)'s exit statuses (mount(8) "RETURN CODES"): bad invocation, mount failure
EXIT_USAGE = 1
EXIT_MOUNT_FAILED = 32


class HelperUsage(Exception):
    pass


@dataclass
class HelperCall:
    source: str
    mountpoint: str
    fake: bool = False  # `-f` from mount(8): do everything but the mount (it is not "foreground")
    options: list = field(default_factory=list)  # passed on to `tdbfs mount -o`
    tdbfs_args: list = field(default_factory=list)  # --cache-mb N, --log FILE, --key-file FILE
    ignored: list = field(default_factory=list)

    def tdbfs_argv(self) -> list:
        argv = ["mount", *self.tdbfs_args]
        if self.options:
            argv += ["-o", ",".join(self.options)]
        return argv + ["--", self.source, self.mountpoint]


def parse(argv) -> HelperCall:
    positional: list = []
    option_texts: list = []
    fake = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-o", "-t"):
            if i + 1 == len(argv):
                raise HelperUsage(f"option {arg} needs a value")
            if arg == "-o":
                option_texts.append(argv[i + 1])
            elif argv[i + 1] not in ("fuse.tdbfs", "tdbfs"):
                raise HelperUsage(f"this helper mounts type fuse.tdbfs, not {argv[i + 1]}")
            i += 2
            continue
        if arg == "-f":
            fake = True
        elif arg in ("-n", "-s", "-v"):  # no mtab, sloppy, verbose: nothing for tdbfs to do
            pass
        elif arg == "-N":
            raise HelperUsage("mounting in another mount namespace (-N) is not supported")
        elif arg.startswith("-") and arg != "-":
            raise HelperUsage(f"unknown option {arg}")
        else:
            positional.append(arg)
        i += 1
    if len(positional) != 2:
        raise HelperUsage("usage: mount.fuse.tdbfs SOURCE MOUNTPOINT [-o OPT[,OPT...]]")
    call = HelperCall(source=positional[0], mountpoint=positional[1], fake=fake)
    for text in option_texts:
        for item in _split_options(text):
            key, eq, value = item.partition("=")
            if item in IGNORED or item.startswith(IGNORED_PREFIXES):
                call.ignored.append(item)
            elif key in TDBFS_OPTIONS:
                if not eq or not value:
                    raise HelperUsage(f"mount option '{key}' needs a value")
                call.tdbfs_args += [TDBFS_OPTIONS[key], value]
            else:
                call.options.append(item)
    return call


def _split_options(text: str) -> list:
    """Split on commas outside double quotes: libmount keeps `x-systemd.requires="a,b"` whole."""
    items, current, quoted = [], [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    items.append("".join(current).strip())
    return items


def main(argv, tdbfs_main) -> int:
    """mount.fuse.tdbfs with `argv` (None: this process's), run as `tdbfs_main` (the command line's
    main, handed in by it: the mount does not import the command line)."""
    from ..frontend.common import error

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        call = parse(argv)
    except HelperUsage as exc:
        error(str(exc))
        return EXIT_USAGE
    if call.fake:
        return 0
    _log_ignored(call)
    status = tdbfs_main(call.tdbfs_argv())
    return {0: 0, 2: EXIT_USAGE}.get(status, EXIT_MOUNT_FAILED)


def _log_ignored(call: HelperCall) -> None:
    """Say in the daemon's log (when there is one) which fstab options were dropped: `rw` above all,
    since the mount is read-only whatever it says. Nothing on the terminal, where mount(8) runs."""
    if "--log" not in call.tdbfs_args or not call.ignored:
        return
    log_file = call.tdbfs_args[call.tdbfs_args.index("--log") + 1]
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"  # as logging does
    note = " (tdbfs is read-only: the mount is read-only whatever rw says)" if "rw" in call.ignored else ""
    try:
        with open(log_file, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"{stamp} INFO tdbfs.fstab: mount options ignored: {','.join(x for x in call.ignored if x)}"
                    f"{note}\n")
    except OSError:
        pass  # `tdbfs mount` reports an unwritable log itself
