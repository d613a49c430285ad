"""`tdbfs export SRC OUT`: the cells TileDB returns (or one fragment's) to CSV, Parquet or stdout; the work
is the library's (library/export.py), this module turns the command line into its arguments and its
failures into one line."""

from __future__ import annotations

from ..frontend.common import CliError, open_store


def cmd_export(args) -> int:
    from ..frontend.remote_options import browse_settings
    from ..library.cell_batches import CellsError, select_cells
    from ..library.export import OutputError, export_cells, output_format
    from ..location import Location
    from ..reader import ReadError

    try:
        if output_format(args.out) == "parquet":
            from ..library.arrow_columns import pyarrow
            pyarrow()
    except (ValueError, ImportError) as exc:   # a bad name, the [parquet] extra missing
        raise CliError(str(exc), code=2) from None
    as_of = None if args.as_of in (None, "now") else _time(args.as_of)
    store = open_store(Location.parse(args.array), args.cache_mb, key_file=args.key_file,
                       remote=browse_settings(args))
    try:
        cells = select_cells(store, as_of, args.subarray, args.fragment)
        export_cells(cells, args.out, overwrite=args.force)
    except (CellsError, FileExistsError) as exc:
        raise CliError(str(exc), code=2) from None
    except ReadError as exc:   # a read TileDB itself refuses at that time
        raise CliError(str(exc)) from None
    except BrokenPipeError:
        raise
    except ValueError as exc:  # a tile whose fields disagree (store/tile_columns.py): named, nothing written
        raise CliError(f"cannot be read: {exc}") from None
    except OutputError as exc:
        raise CliError(str(exc)) from None
    return 0


def _time(text: str) -> int:
    if not text.isdigit():
        raise CliError(f"--as-of {text!r}: a time is 'now' or ms since 1970, as as_of/<T>/ names it", code=2)
    return int(text)
