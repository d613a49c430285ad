"""An array in an object store (s3://, gs://, az://), read through fsspec with s3fs, gcsfs or adlfs.

Every request costs latency and money, so each primitive is one kind of request:
- a folder is one paginated LIST (delimiter '/'), which also gives every file's size and mtime;
  it is kept for `listing_ttl_s` (the mount's entry timeout) and fetched again after it, so new
  fragments appear; a folder marked with `list_tree` (an array's `__fragments/`) is listed the
  first time, and in a pass over its sub-folders, with every folder under it in one paginated LIST
  without a delimiter (listings.py, `_tree_for`);
- a byte range is one ranged GET of exactly those bytes, never past the size the listing gave
  (a length read from a damaged file never asks for more than the file holds);
- a whole file is one GET with the range the listing gave (s3fs would otherwise HEAD it first);
- ranges read ahead (the tiles `tdbfs check` is about to decode, the footers a summary is about to
  parse) go out `RemoteSettings.requests` at a time, each retried as any other.
Object stores have no folder objects and no symlinks: a folder is a common prefix of keys, so an
empty folder (TileDB's empty `__commits/` on a local disk) does not exist, and a folder's mtime is
its newest object's, with its number of entries in the nanoseconds (LastModified ticks in seconds)
so that a vacuum, which only removes, changes it too. Every request is retried up to the deadline
(retry.py). A store that gave no answer within it (to that request or any other: an error status
for one object is an answer) is taken as down for one more deadline: requests
then fail at once and listings are served as last seen, so the daemon keeps serving what it knows
instead of making every reader wait out a deadline of its own. fsspec's own listings cache is off (freshness is decided here) and each
storage gets its own client (`skip_instance_cache`), whose requests run on fsspec's I/O thread.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import inspect
import logging
import stat
import time
from dataclasses import dataclass, field, replace

from ...errors import TdbfsError
from ...location import SCHEMES
from . import FOLDER, Entry, NotRegularError, Storage, path_parts
from .counters import RequestCounters
from .listings import Listing, Listings, absent, flat_listing, tree_listings
from .range_cache import RangeCache
from .read_ahead import ReadAhead
from .retry import DEFAULT_TIMEOUT_S, RemoteIOError, one_line, retrying, retrying_async

__all__ = ["RemoteOpenError", "RemoteSettings", "RemoteStorage", "open_remote"]

log = logging.getLogger("tdbfs.remote")

_FILE_MODE = stat.S_IFREG | 0o444

#: folders whose listing is kept (a walk of 10,000 fragments lists 10,000 folders; one expired is fetched again)
LISTINGS_KEPT = 16384
#: requests a storage sends at once where it reads many small files (footers) or tiles ahead: enough to hide
#: an object store's latency, few enough not to be throttled (RemoteSettings.requests)
DEFAULT_REQUESTS = 16
_DIR_MODE = stat.S_IFDIR | 0o555


@dataclass(frozen=True)
class _Family:
    """One kind of object store: its option prefix, the fsspec package behind it, the extra that installs it."""

    name: str            # option prefix: -o s3.endpoint_url=...
    module: str
    cls: str
    extra: str
    page: int            # entries per LIST page (S3 and GCS 1,000, Azure 5,000)


_S3 = _Family("s3", "s3fs", "S3FileSystem", "s3", 1000)
_GCS = _Family("gcs", "gcsfs", "GCSFileSystem", "gcs", 1000)
_AZ = _Family("az", "adlfs", "AzureBlobFileSystem", "azure", 5000)
FAMILIES = {scheme: {"s3": _S3, "gcs": _GCS, "az": _AZ}[family] for scheme, family in SCHEMES.items()}



@dataclass(frozen=True)
class RemoteSettings:
    """How to reach object stores: fsspec options per family (may hold secrets: never shown), the deadline of
    one request, how long a listing is trusted, and where the on-disk range cache lives."""

    options: dict = field(default_factory=dict, repr=False)   # {"s3": {"endpoint_url": ...}, ...}
    timeout_s: float = DEFAULT_TIMEOUT_S
    listing_ttl_s: float = 1.0
    cache_dir: str | None = None
    requests: int = DEFAULT_REQUESTS   # requests in flight at once when reading ahead (at least 1)


class RemoteOpenError(TdbfsError):
    """The URL cannot be opened (no backend installed, no bucket, no access): one line for the user."""


class _NotAsked(RemoteIOError):
    """A request not sent: the store is taken as down (see _Backend.request)."""


class _Backend:
    """What every storage of one URL shares: the client, the settings, the listings, the counters, the cache."""

    def __init__(self, family: _Family, fs, settings: RemoteSettings, scheme: str):
        self.family, self.fs, self.settings, self.scheme = family, fs, settings, scheme
        self.counters = RequestCounters()
        self.range_cache = RangeCache(settings.cache_dir) if settings.cache_dir else None
        self.listings = Listings(settings.listing_ttl_s, LISTINGS_KEPT)
        self._trees: set = set()   # folders listed with everything under them (list_tree)
        self._tree_fetched: dict = {}   # tree -> time.monotonic() of its last LIST as a tree
        self._down_until = 0.0   # time.monotonic() until which the store is taken as down
        self._answered = 0.0     # time.monotonic() of the last answer the store gave
        fetch = lambda item: self.get(*item[2:])   # noqa: E731
        # tiles (`tdbfs check`) and small files (a summary's footers) each a plan of their own: a background
        # check and a render of array.yaml running together do not drop each other's reads
        self.read_ahead = ReadAhead(fetch, settings.requests)
        self.small_ahead = ReadAhead(fetch, settings.requests, loop=fs.loop,
                                     fetch_async=lambda item: self.get_async(*item[2:]))

    def url(self, path: str) -> str:
        return f"{self.scheme}://{path}"

    def request(self, call, what: str):
        """call(seconds_left), retried up to the deadline; RemoteIOError at once while the store is down."""
        self._not_down(what)
        start = time.monotonic()

        def answered(left: float):
            try:
                return call(left)
            except Exception as exc:
                self._note_answer(exc)
                raise

        try:
            with self.counters.in_flight():
                got = retrying(answered, what, self.settings.timeout_s)
        except OSError as exc:
            self._failed(exc, start)
            raise
        self._answered = time.monotonic()
        return got

    async def request_async(self, call, what: str):
        """`request` on fsspec's event loop: await call(seconds_left)."""
        self._not_down(what)
        start = time.monotonic()

        async def answered(left: float):
            try:
                return await call(left)
            except Exception as exc:
                self._note_answer(exc)
                raise

        try:
            with self.counters.in_flight():
                got = await retrying_async(answered, what, self.settings.timeout_s)
        except OSError as exc:
            self._failed(exc, start)
            raise
        self._answered = time.monotonic()
        return got

    def _not_down(self, what: str) -> None:
        left = self._down_until - time.monotonic()
        if left > 0:
            raise _NotAsked(what, f"not asked: the store gave no answer within {self.settings.timeout_s:g} s "
                                  f"and is asked again in {left:.0f} s")

    def _note_answer(self, exc: BaseException) -> None:
        if _is_answer(exc):
            self._answered = time.monotonic()

    def _failed(self, exc: OSError, start: float) -> None:
        if not isinstance(exc, RemoteIOError):
            self._answered = time.monotonic()   # an answer (no such object, access denied)
        elif self._answered < start:
            # down only if the store gave no answer meanwhile: one object that keeps failing (an error status
            # for it alone) is that object's failure, not the store's, and the other requests go on
            self._down_until = time.monotonic() + self.settings.timeout_s

    def _sync(self, method, *args, timeout: float, **kwargs):
        from fsspec.asyn import sync
        return sync(self.fs.loop, method, *args, timeout=timeout, **kwargs)

    def _list_raw(self, path: str, timeout: float) -> list[dict]:
        if self.family is _S3:   # s3fs's _ls lists the parent too when a prefix is empty: one LIST is enough
            return self._sync(self.fs._lsdir, path, refresh=True, timeout=timeout)
        return self._sync(self.fs._ls, path, detail=True, timeout=timeout)

    def _list_tree_raw(self, path: str, timeout: float) -> list[dict]:
        if self.family is _S3:
            return self._sync(self.fs._lsdir, path, refresh=True, delimiter="", timeout=timeout)
        found = self._sync(self.fs._find, path, detail=True, withdirs=False, timeout=timeout)
        return list(found.values()) if isinstance(found, dict) else list(found)

    def fetch_listing(self, path: str, tree: str | None = None) -> Listing | None:
        """LIST the folder `path` now; None when the store has no such folder (nor bucket). With `tree` (`path` or
        a folder above it), LIST everything under `tree` instead, and keep the listing of every folder there."""
        lister = self._list_tree_raw if tree is not None else self._list_raw
        at = tree if tree is not None else path
        try:
            infos = self.request(lambda left: lister(at, left), f"{self.url(at)}/ (listing)")
        except FileNotFoundError:
            infos = []
        self.counters.add(lists=max(1, -(-len(infos) // self.family.page)))
        if tree is None:
            return flat_listing(path, infos, _mtime_ns, _DIR_MODE, _FILE_MODE)
        found = tree_listings(tree, infos, _mtime_ns, _DIR_MODE, _FILE_MODE)
        self._tree_fetched[tree] = time.monotonic()
        self.listings.drop_under(tree, found)
        self.listings.put({**found, tree: found.get(tree) or absent()})
        return found.get(path)

    def list_tree(self, path: str) -> None:
        """List `path` with every folder under it in one paginated LIST where that pays (`_tree_for`)."""
        self._trees.add(path)

    def _tree_for(self, path: str, kept: Listing | None) -> str | None:
        """The folder to list as a tree to list `path` now, or None for a LIST of `path` alone. A tree costs a
        page per 1,000 files where a LIST of the folder alone costs one per 1,000 sub-folders: it pays the first
        time (a first look at any fragment then costs no LIST) and in a pass that reads every fragment, not to
        see whether the folder changed, nor for the one fragment looked at again later."""
        parent = path.rpartition("/")[0]
        root = path if path in self._trees else parent if parent in self._trees else None
        if root is None:
            return None
        since = self.listings.pass_began()
        if since is None:
            return root if path == root and kept is None else None
        return root if self._tree_fetched.get(root, -1.0) < since else None

    def listing(self, path: str) -> Listing | None:
        """The folder's listing, fetched again once no longer trusted (listings.py); served as last seen while
        the store does not answer (the daemon keeps serving what it knows)."""
        kept = self.listings.get(path)
        if kept is not None and self.listings.trusted(kept):
            return None if kept.absent else kept
        try:
            fresh = self.fetch_listing(path, self._tree_for(path, kept))
        except RemoteIOError as exc:
            if kept is None:
                raise
            if not isinstance(exc, _NotAsked):
                log.warning("%s; serving the listing last seen", exc.strerror)
            fresh = replace(kept, fetched=time.monotonic())
        self.listings.put({path: fresh if fresh is not None else absent()})
        return None if fresh is None or fresh.absent else fresh

    def get(self, path: str, version: tuple, offset: int, size: int) -> bytes:
        """Bytes [offset, offset+size) of the file `path` (of that version): the range cache, else one GET."""
        url = self.url(path)
        data = self._kept_range(url, version, offset, size)
        if data is not None:
            return data
        data = self.request(lambda left: self._sync(self.fs._cat_file, path, start=offset, end=offset + size,
                                                    timeout=left), f"{url} bytes {offset}-{offset + size - 1}")
        return self._got(url, version, offset, size, data)

    async def get_async(self, path: str, version: tuple, offset: int, size: int) -> bytes:
        """`get` on fsspec's event loop: many of them in flight cost no thread each (read ahead)."""
        url = self.url(path)
        data = self._kept_range(url, version, offset, size)
        if data is not None:
            return data

        async def call(left: float):
            return await asyncio.wait_for(self.fs._cat_file(path, start=offset, end=offset + size), left)
        data = await self.request_async(call, f"{url} bytes {offset}-{offset + size - 1}")
        return self._got(url, version, offset, size, data)

    def _kept_range(self, url: str, version: tuple, offset: int, size: int) -> bytes | None:
        cache = self.range_cache
        if cache is not None:
            data = cache.get(url, version, offset, size)
            if data is not None and len(data) == size:
                self.counters.add(cache_hits=1)
                return data
        return None

    def _got(self, url: str, version: tuple, offset: int, size: int, data) -> bytes:
        data = bytes(data[:size])
        self.counters.add(gets=1, bytes_read=len(data))
        if self.range_cache is not None and len(data) == size:
            self.range_cache.put(url, version, offset, size, data)
        return data


class RemoteStorage(Storage):
    """The files under one prefix of a bucket (or container); `uri` is the URL as the user would write it."""

    def __init__(self, backend: _Backend, root: str):
        self._b = backend
        self._root = root.rstrip("/")
        self.uri = backend.url(self._root)

    @property
    def counters(self) -> RequestCounters:
        return self._b.counters

    @property
    def concurrency(self) -> int:
        return max(1, self._b.settings.requests)

    def list_tree(self, rel: str) -> None:
        self._b.list_tree(self._path(rel))

    def pinned(self):
        return self._b.listings.pinned()

    def child(self, rel: str) -> "RemoteStorage":
        return RemoteStorage(self._b, self._path(rel))

    def _path(self, rel: str) -> str:
        parts = path_parts(rel)
        return "/".join([self._root, *parts]) if parts else self._root

    def entries(self, rel: str = "") -> list[Entry]:
        found = self._b.listing(self._path(rel))
        return list(found.entries) if found is not None else []

    def stat(self, rel: str) -> Entry:
        parts = path_parts(rel)
        if not parts:
            own = self._b.listing(self._root)
            if own is None:
                raise FileNotFoundError(errno.ENOENT, "no such folder", self.uri)
            return Entry("", FOLDER, 0, own.mtime_ns, _DIR_MODE)
        entry, _ = self._lookup(parts, rel)
        if entry.is_dir:
            own = self._b.listing(self._path(rel))
            if own is None:   # emptied since the parent's listing
                raise FileNotFoundError(errno.ENOENT, "no such file", rel)
            return entry._replace(mtime_ns=own.mtime_ns)
        return entry

    def _lookup(self, parts: list[str], rel: str) -> tuple[Entry, str]:
        """(entry, ETag) of `rel` from its folder's listing."""
        folder = self._b.listing("/".join([self._root, *parts[:-1]]))
        entry = folder.by_name.get(parts[-1]) if folder is not None else None
        if entry is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", rel)
        return entry, folder.etags.get(parts[-1], "")

    def _file(self, rel: str) -> tuple[Entry, tuple]:
        parts = path_parts(rel)
        if not parts:
            raise NotRegularError(rel, FOLDER)
        entry, etag = self._lookup(parts, rel)
        if not entry.is_file:
            raise NotRegularError(rel, entry.kind)
        return entry, (etag, entry.size, entry.mtime_ns)

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0:
            raise ValueError(f"negative range {offset}+{size} of {rel}")
        entry, version = self._file(rel)
        size = max(0, min(size, entry.size - offset))
        if not size:
            return b""
        return self._get(self._path(rel), version, offset, size)

    def _get(self, path: str, version: tuple, offset: int, size: int) -> bytes:
        """The range as read ahead (tiles, then small files), else one GET now."""
        key = (path, version, offset, size)
        ahead = self._b.read_ahead.take(key)
        if ahead is None:
            ahead = self._b.small_ahead.take(key)
        return ahead if ahead is not None else self._b.get(path, version, offset, size)

    def prefetch(self, ranges: list[tuple[str, int, int]], budget: int) -> None:
        self._b.read_ahead.plan(self._planned(ranges), budget)

    def prefetch_small(self, ranges: list[tuple[str, int, int]], budget: int) -> None:
        self._b.small_ahead.plan(self._planned(ranges), budget)

    def _planned(self, ranges) -> list:
        items = []
        for rel, offset, size in ranges:
            try:
                entry, version = self._file(rel)
            except OSError:
                continue   # the reader's own read reports it
            size = max(0, min(size, entry.size - offset))
            if size:
                path = self._path(rel)
                items.append(((path, version, offset, size), size, path, version, offset, size))
        return items

    def read(self, rel: str) -> bytes:
        entry, version = self._file(rel)
        return self._get(self._path(rel), version, 0, entry.size) if entry.size else b""


def open_remote(url: str, settings: RemoteSettings | None = None) -> RemoteStorage:
    """The storage of the folder at `url`, checked with one LIST: RemoteOpenError (one line) when the backend is
    not installed, the bucket does not exist, access is denied or the store does not answer; FileNotFoundError
    when nothing is under the prefix."""
    settings = settings or RemoteSettings()
    scheme = url.partition("://")[0].lower()
    family = FAMILIES[scheme]
    try:
        module = __import__(family.module)
        __import__("fsspec.asyn")
    except ImportError:
        raise RemoteOpenError(f"{scheme}:// URLs need the '{family.extra}' extra: "
                              f"pip install 'tdbfs[{family.extra}]'") from None
    fs = _make_fs(family, getattr(module, family.cls), settings, url)
    root = fs._strip_protocol(url).rstrip("/")
    if not root:
        raise RemoteOpenError(f"{url}: no bucket in the URL")
    backend = _Backend(family, fs, settings, scheme)
    storage = RemoteStorage(backend, root)
    try:
        _set_up_client(backend)
        found = backend.listing(storage._root)
        if found is None and not _bucket_exists(backend, root.partition("/")[0]):
            raise RemoteOpenError(f"bucket not found: {scheme}://{root.partition('/')[0]}")
    except PermissionError as exc:
        raise RemoteOpenError(f"access denied to {storage.uri} (check the credentials or the region): "
                              f"{one_line(exc)}") from None
    except RemoteIOError as exc:
        raise RemoteOpenError(f"cannot reach {storage.uri}: {exc.strerror}") from None
    except RemoteOpenError:
        raise
    except Exception as exc:   # noqa: BLE001 -- no credentials, a bad endpoint, a region mismatch: one line
        raise RemoteOpenError(f"cannot open {storage.uri}: {one_line(exc)}") from None
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "nothing under this prefix", storage.uri)
    return storage


def _make_fs(family: _Family, cls, settings: RemoteSettings, url: str):
    options = dict(settings.options.get(family.name, {}))
    # freshness is decided by the listing TTL here, and each storage has its own client
    options.update(skip_instance_cache=True, use_listings_cache=False)
    if family is _S3:
        # retried by retry.py up to the deadline: one attempt each inside botocore (and s3fs, below), bounded
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", min(settings.timeout_s, 10.0))
        config.setdefault("read_timeout", min(settings.timeout_s, 30.0))
        config.setdefault("retries", {"total_max_attempts": 1})
        # the requests read ahead in parallel each need a connection of their own (botocore keeps 10)
        config.setdefault("max_pool_connections", max(10, settings.requests))
        options["config_kwargs"] = config
    try:
        fs = cls(**options)
    except Exception as exc:  # noqa: BLE001 -- an unknown option, an unreadable token file: one line
        raise RemoteOpenError(f"cannot set up {url.partition('://')[0]}:// access: {one_line(exc)}") from None
    if family is _S3:
        fs.retries = 1
    return fs


#: seconds the client's own set-up may take (loading the service's models, reading credentials); not counted in
#: the first request's deadline, which is about the store's answer
CLIENT_SETUP_S = 120.0


def _set_up_client(backend: _Backend) -> None:
    """Build the client session before the first request, so that a slow start of the library (botocore loads
    its service models on first use) is not taken for a store that does not answer."""
    set_session = getattr(backend.fs, "set_session", None)   # s3fs's; the other backends start in no time
    if inspect.iscoroutinefunction(set_session):
        backend._sync(set_session, timeout=CLIENT_SETUP_S)


def _bucket_exists(backend: _Backend, bucket: str) -> bool:
    try:
        retrying(lambda left: backend._sync(backend.fs._ls, bucket, timeout=left), f"{backend.url(bucket)}",
                 backend.settings.timeout_s)
    except FileNotFoundError:
        return False
    return True


def _is_answer(exc: BaseException) -> bool:
    """Whether a failed request got an answer from the store (an HTTP error status, as botocore's
    ClientError, gcsfs's HttpError or azure's HttpResponseError carry it), not silence or a broken link."""
    seen = 0
    while exc is not None and seen < 8:
        if getattr(exc, "response", None) is not None or isinstance(getattr(exc, "status_code", None), int) \
                or isinstance(getattr(exc, "code", None), int):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _mtime_ns(info: dict) -> int:
    """The object's last modification in ns, from whichever field its store lists (S3 LastModified, GCS updated,
    Azure last_modified); 0 when there is none."""
    value = info.get("LastModified") or info.get("last_modified") or info.get("updated") or info.get("mtime")
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return 0
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return (value - _EPOCH) // datetime.timedelta(microseconds=1) * 1000
    if isinstance(value, (int, float)):
        return int(value * 1_000_000_000)
    return 0
