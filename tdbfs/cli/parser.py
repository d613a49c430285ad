"""The command line: every command, option and help text."""

from __future__ import annotations

import argparse
import functools

from .. import __version__
from .browse import cmd_cat, cmd_ls, cmd_tree
from .check_command import cmd_check
from .export_command import cmd_export
from .salvage_command import cmd_salvage
from ..frontend.common import DEFAULT_CACHE_MB, PROG
from ..mount.command import cmd_mount, cmd_umount


DESCRIPTION = """\
tdbfs shows a TileDB array's on-disk structures (schemas, fragments, footers,
R-trees, tiles, commits, metadata) as a read-only tree of decoded files.
Mount it with FUSE, or read the same tree without FUSE with ls, cat and tree.
"""


EPILOG = """\
examples:
  tdbfs mount /data/my_array /mnt/arr      mount in the background, return when ready
  ls /mnt/arr/fragments
  cat /mnt/arr/schema/current.yaml
  tdbfs umount /mnt/arr
  tdbfs mount -f --log /tmp/tdbfs.log /data/my_array /mnt/arr   stay in the foreground
  tdbfs ls -l /data/my_array fragments     list a folder of the view without FUSE
  tdbfs cat /data/my_array array.yaml      print one file of the view
  tdbfs tree --depth 2 /data/my_array      show the view as a tree
  tdbfs check /data/my_array               check every structure and tile (fsck)
  tdbfs export /data/my_array cells.csv    the cells TileDB returns, each with its source
  tdbfs salvage /data/my_array /data/saved  every surviving cell, as a new array

exit status:
  0  success
  1  runtime error: array not found or not a TileDB array, mount point missing,
     busy or not empty, FUSE unavailable, path not in the tree, view unreadable
  2  usage error (bad command line)
  check: 0 clean, 1 problems found, 2 could not run (see 'tdbfs check --help')
  salvage: 0 nothing lost, 1 something lost or nothing written, 2 usage error (DEST exists)
"""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


@functools.cache   # one per process: a forked daemon parses its command line with its parent's (2-3 ms)
def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("mount", help="mount ARRAY's view at MNT (read-only)", formatter_class=fmt,
                       description="Mount the decoded view of ARRAY at the empty folder MNT.\n"
                                   "Without -f the daemon runs in the background and the command\n"
                                   "returns once the mount answers.",
                       epilog="mount options (-o): threads (multi-threaded daemon), attr_timeout=S,\n"
                              "entry_timeout=S, negative_timeout=S, fsname=NAME, allow_other, and any\n"
                              "other libfuse option. Not supported: rw, large_read.\n"
                              + REMOTE_OPTIONS_HELP + "\n"
                              "examples:\n  tdbfs mount /data/my_array /mnt/arr\n"
                              "  tdbfs mount -o allow_other --cache-mb 2048 /data/my_array /mnt/arr\n"
                              "  tdbfs mount -o s3.endpoint_url=http://minio:9000 s3://bucket/array /mnt/arr\n"
                              "  tdbfs mount -f --debug --log /tmp/tdbfs.log /data/my_array /mnt/arr\n")
    p.add_argument("array", metavar="ARRAY", help="TileDB array folder, or its URL (s3://, gs://, az://)")
    p.add_argument("mountpoint", metavar="MNT", help="empty folder to mount on")
    p.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground (the daemon itself)")
    p.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT]",
                   help="mount options, comma separated (repeatable); check=metadata|full|off: what the mount "
                        "checks by itself in the background (default metadata, off for a URL)")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N",
                   help=f"memory for decoded data, in MiB (default {DEFAULT_CACHE_MB})")
    p.add_argument("-j", "--jobs", type=_positive_int, default=None, metavar="N",
                   help="worker processes that digest the fragments' metadata for array.yaml, stats.csv and "
                        "fragments.svg when at least 1,000 fragments have none yet, local arrays only (default: "
                        "every core, up to 8; 1: the daemon alone); the files are the same whatever N")
    p.add_argument("--log", metavar="FILE", help="daemon log file (default: stderr with -f, else none)")
    p.add_argument("--debug", action="store_true", help="verbose log, tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    p.add_argument("--spawned", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--key-fd", type=int, default=None, help=argparse.SUPPRESS)  # the key from the parent
    p.add_argument("--cache-dir", metavar="DIR", help=CACHE_DIR_HELP)
    p.add_argument("--listing-fd", type=int, default=None, help=argparse.SUPPRESS)  # folders the parent listed
    p.add_argument("--secrets-fd", type=int, default=None, help=argparse.SUPPRESS)  # secret -o items, from the parent
    p.set_defaults(func=cmd_mount)

    p = sub.add_parser("umount", aliases=["unmount"], help="unmount a tdbfs mount", formatter_class=fmt,
                       description="Unmount MNT (fusermount3 -u, fusermount -u or umount).")
    p.add_argument("mountpoint", metavar="MNT")
    p.add_argument("-z", "--lazy", action="store_true", help="lazy unmount (detach now, clean up when not busy)")
    p.set_defaults(func=cmd_umount)

    p = sub.add_parser("ls", help="list a folder of the view (no FUSE needed)", formatter_class=fmt,
                       description="List PATH (default: the top) of ARRAY's view, one entry per line,\n"
                                   "folders with a trailing '/'.",
                       epilog="examples:\n  tdbfs ls /data/my_array\n  tdbfs ls -l /data/my_array fragments\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("path", metavar="PATH", nargs="?", default="")
    p.add_argument("-l", "--long", action="store_true", help="long format: mode, size, time, name")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    _add_remote_arguments(p)
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("cat", help="write one file of the view to stdout (no FUSE needed)", formatter_class=fmt,
                       epilog="examples:\n  tdbfs cat /data/my_array array.yaml\n"
                              "  tdbfs cat /data/my_array fragments/F/attrs/a0/tile_0.bin | od -An -tu4\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    _add_remote_arguments(p)
    p.set_defaults(func=cmd_cat)

    p = sub.add_parser("tree", help="show the view as an indented tree (no FUSE needed)", formatter_class=fmt,
                       epilog="examples:\n  tdbfs tree /data/my_array\n  tdbfs tree --depth 1 /data/my_array fragments\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("path", metavar="PATH", nargs="?", default="")
    p.add_argument("-L", "--depth", type=_positive_int, default=None, metavar="N",
                   help="descend at most N levels")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    _add_remote_arguments(p)
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("check", help="check every structure and tile of ARRAY (fsck; no FUSE needed)",
                       formatter_class=fmt,
                       description="Decode every structure and every tile of ARRAY, verify every checksum,\n"
                                   "offset and size against the files, the footers against the schema and\n"
                                   "the commits against the fragment folders. Prints one line per problem,\n"
                                   "'FILE:OFFSET: STRUCTURE: MESSAGE' (OFFSET '-' when none applies), then a\n"
                                   "summary. Never writes to the array.",
                       epilog="exit status:\n  0  clean (warnings, such as fragments consolidated but not yet\n"
                              "     vacuumed, do not count)\n  1  problems found\n"
                              "  2  could not run: not an array, unreadable, or a usage error\n\n"
                              "examples:\n  tdbfs check /data/my_array\n"
                              "  tdbfs check --json /data/my_array | jq .problems\n"
                              "  tdbfs check --jobs 8 s3://bucket/my_array\n")
    p.add_argument("array", metavar="ARRAY")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    p.add_argument("-q", "--quiet", action="store_true", help="no problem lines and no progress, only the summary")
    p.add_argument("-j", "--jobs", type=_positive_int, default=None, metavar="N",
                   help="check fragments in N worker processes, each with --cache-mb / N of memory (default: "
                        "every core, or 1 for an array too small for workers to pay for their start: under "
                        "512 MiB on 2 cores; 1: in this process); the output is the same whatever N")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="check fragments on the Dask cluster whose scheduler is at ADDRESS (tcp://HOST:8786); "
                        "its workers read the array from its location themselves")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    _add_remote_arguments(p)
    p.set_defaults(func=cmd_check)

    _add_export(sub, fmt)
    # -- salvage (its own block: other commands are added beside it) ------------------------------------
    p = sub.add_parser("salvage", help="copy every cell that survives into a new array TileDB opens",
                       formatter_class=fmt,
                       description="Build DEST, a new TileDB array holding every cell of SRC that survives,\n"
                                   "as a reader at --as-of T sees SRC. The schemas, enumerations, array\n"
                                   "metadata and delete conditions that decode are copied byte for byte;\n"
                                   "each fragment read at T is checked as 'tdbfs check' checks it, copied\n"
                                   "byte for byte when sound, else written again from the cells of its\n"
                                   "tiles that decode, with tiledb-py (pip install 'tdbfs[salvage]'), at its\n"
                                   "own time range. DEST/salvage.yaml says what became of each fragment\n"
                                   "and each tile lost. SRC is never written; DEST appears only when complete.",
                       epilog="exit status:\n  0  nothing lost\n  1  something lost (see DEST/salvage.yaml), or "
                              "nothing written\n     (SRC not found, the schema in force does not decode)\n"
                              "  2  usage error (DEST exists, a bad --as-of)\n\n"
                              "examples:\n  tdbfs salvage /data/my_array /data/my_array.saved\n"
                              "  tdbfs salvage --as-of 1700000000000 s3://bucket/my_array ./saved\n"
                              "  tdbfs salvage --key-file /secure/key /data/encrypted /data/encrypted.saved\n")
    p.add_argument("src", metavar="SRC", help="TileDB array folder, or its URL (s3://, gs://, az://)")
    p.add_argument("dest", metavar="DEST", help="the new array: a local folder that must not exist")
    p.add_argument("--as-of", metavar="T", default=None,
                   help="read SRC as a reader opening it at T sees it: milliseconds since the epoch, as\n"
                        "as_of/<T> in the view (default: now)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP + "; the copy is encrypted with it too")
    _add_remote_arguments(p)
    p.set_defaults(func=cmd_salvage)
    # -- end of salvage ---------------------------------------------------------------------------------

    p = sub.add_parser("completion", help="print the shell completion script for bash or zsh", formatter_class=fmt,
                       epilog="examples:\n  source <(tdbfs completion bash)          in ~/.bashrc\n"
                              "  source <(tdbfs completion zsh)           in ~/.zshrc, after compinit\n")
    p.add_argument("shell", metavar="SHELL", choices=("bash", "zsh"), help="bash or zsh")
    p.set_defaults(func=_cmd_completion)
    return parser


# -- tdbfs export ---------------------------------------------------------------------------------
def _add_export(sub, fmt) -> None:
    p = sub.add_parser("export", help="write the cells TileDB returns to CSV or Parquet (no FUSE needed)",
                       formatter_class=fmt,
                       description="Write the cells a TileDB read of ARRAY opened at --as-of returns (newest\n"
                                   "fragment wins, fill values, deletes applied) to OUT, each with its source:\n"
                                   "the fragment and tile its value comes from. OUT ends in .csv (the bytes of\n"
                                   "as_of/<T>/cells.csv) or .parquet (TileDB's types kept; needs the 'parquet'\n"
                                   "extra), or is '-' for CSV on stdout. Never writes to the array.",
                       epilog="examples:\n  tdbfs export /data/my_array cells.parquet\n"
                              "  tdbfs export --as-of 1700000000000 --subarray d0=10..20,d1=5..9 /data/my_array -\n"
                              "  tdbfs export --fragment __1_1_0123abcd_22 /data/my_array frag.csv\n")
    p.add_argument("array", metavar="ARRAY", help="TileDB array folder, or its URL (s3://, gs://, az://)")
    p.add_argument("out", metavar="OUT", help="OUT.csv, OUT.parquet, or - (CSV on stdout)")
    p.add_argument("--as-of", metavar="T", default=None,
                   help="the array as opened at T: ms since 1970 or 'now' (default: now)")
    p.add_argument("--subarray", metavar="RANGES", default=None,
                   help="only the cells in these inclusive ranges: DIM=LO..HI[,DIM=LO..HI...] (as "
                        "as_of/<T>/cells/<RANGES>.csv names them; ';' joins ranges of one dimension)")
    p.add_argument("--fragment", metavar="NAME", default=None,
                   help="instead of what a read returns: the cells fragment NAME stores, as it stores them")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--cache-mb", type=_positive_int, default=DEFAULT_CACHE_MB, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", help="tracebacks on errors")
    p.add_argument("--key-file", metavar="FILE", help=KEY_FILE_HELP)
    _add_remote_arguments(p)
    p.set_defaults(func=cmd_export)


def _cmd_completion(args) -> int:
    from .completion import script  # here: the other commands start without importing it
    print(script(args.shell, build_parser()), end="")
    return 0


def _add_remote_arguments(p) -> None:
    """-o and --cache-dir, for the commands that read an array without mounting it."""
    p.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT]",
                   help="backend options for a URL (s3.NAME=VALUE, gcs.NAME=VALUE, az.NAME=VALUE, timeout=S)")
    p.add_argument("--cache-dir", metavar="DIR", help=CACHE_DIR_HELP)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least 1")
    return value


KEY_FILE_HELP = ("file holding the AES-256-GCM key of an encrypted array: 32 bytes (the 32-character string\n"
                 "given to TileDB), 64 hex digits or 44 base64 characters; default: $TDBFS_KEY_FILE,\n"
                 "else the value of $TDBFS_ENCRYPTION_KEY. Never give the key itself on the command line")

CACHE_DIR_HELP = "for a URL: keep the byte ranges read in DIR, so that later runs and remounts reuse them"

REMOTE_OPTIONS_HELP = (
    "arrays in object stores (ARRAY is s3://BUCKET/PATH, gs://, az:// or abfs://): credentials come from\n"
    "each SDK's own chain (AWS_* variables, profiles, instance roles; AWS_ENDPOINT_URL for MinIO, Ceph\n"
    "...); backend options go to s3fs, gcsfs or adlfs as -o s3.endpoint_url=URL, -o s3.anon=true,\n"
    "-o gcs.token=..., -o az.account_name=...; -o timeout=S bounds each request with its retries\n"
    "(default 30 s). Options that carry secrets never appear in ps.\n")
