"""What a mount settles before libfuse is loaded: which libfuse, whether FUSE can work on this machine,
and the mount options.

Kept apart from the adapter (`fuse_ops`, which imports the views, and libfuse.py, which loads mfusepy) so
that `tdbfs mount`, which checks these while its daemon starts, imports neither: at 100,000 fragments
the listing it takes for the daemon is on the mount's critical path, and those imports were a fifth
of it (docs/performance.md §5).
"""

from __future__ import annotations

import ctypes
import functools
import os

# --------------------------------------------------------------------------- libfuse

_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
             "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/local/lib")
_LIB_SONAMES = {3: ("fuse3", "libfuse3.so.3"), 2: ("fuse", "libfuse.so.2")}
FUSERMOUNT = {3: "fusermount3", 2: "fusermount"}
INSTALL_HINT = {3: "apt-get install fuse3", 2: "apt-get install libfuse2 fuse"}


@functools.lru_cache(maxsize=None)
def find_libfuse(major: int) -> str | None:
    """A loadable libfuse of the given major version (2 or 3), or None.

    The usual library folders and the dynamic linker's own search come first:
    ctypes.util.find_library runs `ldconfig -p` (or gcc) in a subprocess, which costs
    more than the rest of the mount's start-up work, so it is only the last resort."""
    short, soname = _LIB_SONAMES[major]
    candidates = [p for p in (os.path.join(d, soname) for d in _LIB_DIRS) if os.path.exists(p)]
    for cand in candidates + [soname]:
        if _loads(cand):
            return cand
    import ctypes.util
    found = ctypes.util.find_library(short)
    if found and (major == 3 or ".so.2" in found or found.endswith("libfuse.so")) and _loads(found):
        return found
    return None


def _loads(path: str) -> bool:
    try:
        ctypes.CDLL(path)
    except OSError:
        return False
    return True


def choose_libfuse() -> tuple[int | None, str | None]:
    """(major, path) of the libfuse tdbfs will use; (None, None) when there is none.

    ``FUSE_LIBRARY_PATH`` (mfusepy's own variable) wins; else ``TDBFS_LIBFUSE=2|3``;
    else libfuse3, then libfuse2.
    """
    explicit = os.environ.get("FUSE_LIBRARY_PATH")
    if explicit:
        return (3 if "fuse3" in os.path.basename(explicit) else 2), explicit
    wanted = os.environ.get("TDBFS_LIBFUSE", "").strip()
    order = [int(wanted)] if wanted in ("2", "3") else [3, 2]
    for major in order:
        path = find_libfuse(major)
        if path:
            return major, path
    return None, None


def setup_problem() -> str | None:
    """Why a mount cannot work on this machine (one line, with how to fix it), or None, judged
    without loading libfuse through mfusepy (`fuse_ops.fuse_problem` adds that)."""
    major, path = choose_libfuse()
    if path is None:
        return ("libfuse is not installed (install it: apt-get install fuse3, "
                "or apt-get install libfuse2)")
    if not os.path.exists("/dev/fuse"):
        return ("/dev/fuse is missing (load the kernel module: modprobe fuse; "
                "in a container run it with --device /dev/fuse --cap-add SYS_ADMIN)")
    if os.geteuid() != 0:
        tool = FUSERMOUNT[major or 3]
        if not any(which(t) for t in (tool, "fusermount3", "fusermount")):
            return f"{tool} is not installed (install it: {INSTALL_HINT[major or 3]})"
    return None


def which(name: str) -> str | None:
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) + ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


# --------------------------------------------------------------------------- options

#: options that cannot work with tdbfs: rw (it is read-only), large_read (kernel
#: 6.x rejects it and the mount fails, docs/performance.md §2).
FORBIDDEN_OPTIONS = {
    "rw": "tdbfs is read-only",
    "large_read": "the kernel rejects it and the mount fails",
}


class FuseOptions:
    """Every FUSE mount option tdbfs uses, in one place.

    Defaults, and why (measurements in docs/performance.md):

    * ``ro`` always: the kernel itself answers EROFS to every write.
    * no ``default_permissions``: with it, the kernel checks the modes of every folder on every
      path it walks, and with ``attr_timeout = 0`` each such check was a round trip (an ``ls -lR``
      made 7.6 requests a line, 3.3x slower). The adapter checks instead (`_require`), against
      the same modes, whenever other users can reach the mount (``allow_other``, ``allow_root``);
      without those options the kernel lets no one but the mounting user in.
    * ``threads``: a single-threaded loop (``nothreads``) was 1.3-1.9x faster for a sequential reader
      on 2 vCPUs, but a render of seconds held up every other request of the mount. Several threads
      then, of which one runs Python at a time on a local array unless a request takes long
      (`for_array`, fuse_loop.RequestGate): quick requests queue as in the loop. The store
      still decodes the next big tile on a background thread (`ByteLRU.make_soon`).
    * ``entry_timeout = 1 s``: folders such as ``fragments/`` and ``commits/`` change while
      mounted, and libfuse's high-level API only has one timeout for all nodes; 1 s keeps
      warm tree walks cached yet shows new and vanished names quickly.
      ``negative_timeout = 0``: a fragment that appears is found at once.
    * ``attr_timeout = 0``: summaries (``array.yaml``, ``fragment.yaml``, commit views) change
      size when a fragment is committed or a problem is found. With a cached size the kernel
      clamped a later read to the old length (``cat`` printed ``problems:\n- f``), so every
      stat asks the daemon, which renders the current size. ``-o attr_timeout=S`` still
      trades that for fewer round trips. Immutable nodes (the contents of a committed fragment)
      get `fuse_ops.IMMUTABLE_ATTR_TIMEOUT` instead (libfuse3; see `fuse_ops._attr_timeout_for`).
    * no global ``kernel_cache``: ``open`` sets ``keep_cache`` for immutable files only
      (decoded tiles, raw fragment files), so their page cache survives re-opens
      (8-10 GB/s re-reads).
    * ``direct_io`` only on handles of rendered files that can change: each such open takes
      one rendering and serves every read and fstat from it, and direct I/O keeps the kernel
      from serving pages or clamping to a size of another rendering. Immutable files never
      use it (mmap works, reads are cached): on tile files it made a dense `cat` 8-25% faster, but a
      shared mmap then fails with ENODEV (FUSE_DIRECT_IO_ALLOW_MMAP needs libfuse 3.16). Never ``large_read``.
    * ``read_ahead_kb = 1024``: the kernel reads ahead 128 KiB on a FUSE mount, so libfuse3 gets
      256 KiB requests; once the mount is live the daemon raises its read-ahead (root only: the
      mount's ``/sys/class/bdi/<dev>/read_ahead_kb``), and a reader of 1 MiB (``st_blksize``) gets
      requests of 1 MiB, a whole sparse tile in one. 0 leaves the kernel's setting.
    """

    # a plain class, not a dataclass: `tdbfs mount` imports this module, and dataclasses (with inspect)
    # would be half of its import time
    __slots__ = ("foreground", "threads", "debug", "fsname", "subtype", "attr_timeout", "entry_timeout",
                 "negative_timeout", "max_read", "read_ahead_kb", "extra", "check", "python_slots")

    def __init__(self, *, foreground: bool = True, threads: bool = True, debug: bool = False,
                 fsname: str = "tdbfs", subtype: str = "tdbfs", attr_timeout: float = 0.0,
                 entry_timeout: float = 1.0, negative_timeout: float = 0.0, max_read: int | None = None,
                 read_ahead_kb: int = 1024, extra: dict | None = None):
        self.foreground, self.threads, self.debug = foreground, threads, debug
        self.fsname, self.subtype = fsname, subtype
        self.attr_timeout, self.entry_timeout, self.negative_timeout = attr_timeout, entry_timeout, negative_timeout
        self.max_read, self.read_ahead_kb = max_read, read_ahead_kb
        self.extra = {} if extra is None else extra
        self.check: str | None = None   # -o check=off|metadata|full (check/background.py); None: the default
        #: how many request threads run Python at once (fuse_loop.RequestGate); None: as many as libfuse runs
        self.python_slots: int | None = None

    @classmethod
    def parse(cls, option_strings, **kwargs) -> "FuseOptions":
        """Options from ``-o a,b=c`` strings; ValueError for an option tdbfs cannot honour.

        ``nothreads`` selects the single-threaded loop (``threads``, the default, the multi-threaded
        one); ``ro``, ``fsname``, ``subtype``, the timeouts, ``max_read`` and ``read_ahead_kb`` map to
        their fields; anything else goes to libfuse as is.
        """
        opts = cls(**kwargs)
        for text in option_strings or ():
            for item in text.split(","):
                item = item.strip()
                if not item:
                    continue
                key, eq, value = item.partition("=")
                key = key.strip()
                if key in FORBIDDEN_OPTIONS:
                    raise ValueError(f"mount option '{key}' is not supported: {FORBIDDEN_OPTIONS[key]}")
                if key == "ro":
                    continue
                if key in ("threads", "nothreads"):
                    opts.threads = key == "threads"
                elif key == "debug":
                    opts.debug = True
                elif key in ("fsname", "subtype"):
                    if not value or "," in value:
                        raise ValueError(f"mount option '{key}' needs a value")
                    setattr(opts, key, value)
                elif key == "check":   # tdbfs's own, never libfuse's
                    opts.check = value if value in CHECK_LEVELS else _bad_check(value)
                elif key in _NUMBERS:
                    setattr(opts, key, _option_number(key, value, *_NUMBERS[key]))
                else:
                    opts.extra[key] = value if eq else True
        return opts

    def for_array(self, libfuse_version, remote: bool = False) -> None:
        """The threads of a mount. A local array's requests are Python work under one lock (the GIL): two
        at work on 2 cores cost 9% more CPU than one (docs/performance.md §2), so one runs at a time unless
        it takes long (fuse_loop.RequestGate), and libfuse runs more threads, so that renders that take
        long never hold them all (libfuse 3.12 and later; libfuse2 runs up to 10). A remote array's
        requests wait on the network: libfuse's 10, all at work. As many may stay idle: none exits, and
        each keeps its Python thread state (fuse_loop._keep_thread_state); libfuse's own default for that
        is a number it then refuses, with a message in the log."""
        if not self.threads:
            return
        if not remote:
            self.python_slots = 1
        if (libfuse_version or (0, 0)) >= (3, 12):
            threads = max(LOCAL_MIN_THREADS, 2 * len(os.sched_getaffinity(0))) if not remote else 10
            self.extra.setdefault("max_threads", str(threads))
            self.extra.setdefault("max_idle_threads", self.extra["max_threads"])

    def fuse_kwargs(self) -> dict:
        """Keyword arguments for ``mfusepy.FUSE``."""
        kw = {
            "foreground": self.foreground,
            "nothreads": not self.threads,
            "debug": self.debug,
            "ro": True,
            "fsname": _escape_option(self.fsname),
            "subtype": self.subtype,
            "attr_timeout": _num(self.attr_timeout),
            "entry_timeout": _num(self.entry_timeout),
            "negative_timeout": _num(self.negative_timeout),
        }
        if self.max_read:
            kw["max_read"] = int(self.max_read)
        kw.update(self.extra)
        return kw

    def page_cache(self) -> bool:
        """True when the kernel keeps the pages it was served of a file that allows it (tile files):
        everything but ``direct_io``, which sends every read to the daemon."""
        return "direct_io" not in self.extra

    def lookup_ttl(self) -> float:
        """How long the adapter may reuse a folder listing for lookups: as long as the kernel
        keeps the names it found (entry_timeout). Attributes are never taken from the listing,
        and with attr_timeout 0 a per-stat re-listing would make `ls -l commits/` quadratic."""
        return self.entry_timeout


#: libfuse threads of a mount of a local array, at least: a request is answered beside this many, less one,
#: renders that take long
LOCAL_MIN_THREADS = 8

#: the options that take a number: its type, and what a wrong value is told it should be
_NUMBERS = {**dict.fromkeys(("attr_timeout", "entry_timeout", "negative_timeout"), (float, "a number of seconds")),
            **dict.fromkeys(("max_read", "read_ahead_kb"), (int, "a whole number"))}


#: -o check=LEVEL: what the mount checks in the background (check/background.py): store/checked.py's
#: LEVELS, not imported from there, since `tdbfs mount` itself imports no store
CHECK_LEVELS = ("off", "metadata", "full")


def _bad_check(value: str):
    raise ValueError(f"mount option 'check' takes one of {', '.join(CHECK_LEVELS)}, not '{value}'")


def _option_number(key: str, value: str, kind, wanted: str):
    try:
        number = kind(value)
    except ValueError:
        raise ValueError(f"mount option '{key}' needs {wanted}, not '{value}'") from None
    if number < 0:
        raise ValueError(f"mount option '{key}' must not be negative")
    return number


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _escape_option(value: str) -> str:
    # libfuse splits -o on commas and takes a backslash as "next character literally"
    return value.replace("\\", "\\\\").replace(",", "\\,")


def default_fsname(array_path: str) -> str:
    """The mount's source as `mount` and `df` show it: the array's absolute path, or
    "tdbfs" for a path libfuse or mountinfo cannot carry (control characters)."""
    path = os.path.abspath(array_path)
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "tdbfs"
    return path


def access_mask(path: str) -> int:
    """The read/execute bits anyone who can read the array at `path` gets in its view (the store's
    `access_mask`, which every group member's location gets too)."""
    from ..store.storage.local import access_mask as folder_mask
    return folder_mask(path)
