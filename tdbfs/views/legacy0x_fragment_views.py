"""What only a TileDB 0.x fragment has, and its words (`Legacy0xViews`: book_keeping.yaml, the MBRs,
and the 0.x wording of summaries and records); the rest of its folder is fragment_views.py, the tree
around it legacy0x_views.py."""

from __future__ import annotations

import numpy as np

from ..format import fragment_metadata as fm
from ..format.legacy0x.schema import COORDS
from ..store.fragment_interface import DATA
from ..store.legacy0x_fragment import BOOK_KEEPING_FILE, Legacy0xFragment
from ..text import escape_name
from .common import guarded, guarded_children, yaml_file
from .describe.legacy0x import describe_book_keeping, describe_codec, describe_legacy0x_name
from .nodes import BytesFile, InCache, StaticDir, kept
from .render import to_csv


# -- what only 0.x fragments have, and its words (the rest is fragment_views.py) --------------

class Legacy0xViews:
    #: a field whose tiles cannot be located is left out of the tile list; the rest still shows
    partial_tile_list = True

    @staticmethod
    def metadata_children(frag: Legacy0xFragment, key, fixed: bool) -> dict:
        t = frag.mtime()
        return {
            "book_keeping.yaml": yaml_file(lambda: describe_book_keeping(frag.book_keeping(), frag.schema()),
                                           frag.problems, f"{frag.rel}/{BOOK_KEEPING_FILE}", "book-keeping",
                                           keep=kept(fixed), mtime=t),
            "rtree": StaticDir(guarded_children(lambda: _mbrs(frag, key, fixed), frag), immutable=fixed, mtime=t),
        }

    @staticmethod
    def map_children(frag: Legacy0xFragment, key, fixed: bool) -> dict:
        return {}  # no generic tiles to map

    @staticmethod
    def summary_name(frag: Legacy0xFragment, out: dict) -> None:
        out["layout"] = "TileDB 0.x"
        try:
            out.update(describe_legacy0x_name(frag.parsed_name))
        except Exception as exc:
            frag.problems.add_error(exc, frag.rel, "0.x fragment name")
        reasons = frag.uncommitted_reasons()
        out["committed"] = not reasons
        if reasons:
            out["uncommitted"] = reasons

    @staticmethod
    def summary_metadata(frag: Legacy0xFragment) -> dict:
        frag.schema()
        frag.book_keeping()
        return {}

    @staticmethod
    def summary_shape(frag: Legacy0xFragment) -> dict:
        return {"tile_grid": frag.dense_tile_grid()} if frag.dense else {}

    @staticmethod
    def summary_statistics(frag: Legacy0xFragment) -> dict:
        return {}

    @staticmethod
    def summary_state(frag: Legacy0xFragment, out: dict) -> None:
        pass  # said with the name: 0.x has no commit files

    @staticmethod
    def coords_dim_stem(name: str, j: int) -> str:
        return escape_name(name)

    @staticmethod
    def coords_where(frag: Legacy0xFragment, coords) -> tuple[str, str]:
        return frag.rel, f"{frag.rel}/{COORDS}"

    @staticmethod
    def coords_dim_info(frag: Legacy0xFragment, coords, d: int) -> dict:
        s = frag.schema()
        return {"name": s.dimensions[d], "kind": "dimension", "index": d, "datatype": s.coord_type.name,
                "cell_val_num": 1, "split_from": f"{COORDS}.tdb (interleaved coordinates)",
                "tile_count": frag.tile_count()}

    @staticmethod
    def coords_dim_record(frag: Legacy0xFragment, coords, d: int, k: int, record: dict) -> dict:
        """Tile K of one dimension: nothing of it is stored apart, so its record is the __coords tile
        it is cut from (`record`: where it is on disk, its codec, how it decoded), and where the column
        sits in it."""
        s = frag.schema()
        out = record
        out.update({"field": s.dimensions[d], "stem": escape_name(s.dimensions[d]), "dimension_index": d,
                    "datatype": s.coord_type.name, "derived_from": f"{COORDS}/tile_{k}.bin",
                    "coords_layout": f"interleaved: each cell's {s.dim_num} coordinates together, this dimension's "
                                     f"at byte {d * s.coord_type.size} of every {s.coords_size}-byte cell",
                    "size": frag.tile_cell_num(k) * s.coord_type.size})
        return out

    @staticmethod
    def field_info(frag: Legacy0xFragment, field) -> dict:
        files = dict(frag.files())
        if field.kind == fm.COORDS:
            s = frag.schema()
            out = {"name": COORDS, "kind": "coordinates", "index": field.idx, "datatype": s.coord_type.name,
                   "cell_val_num": s.dim_num, "dimensions": list(s.dimensions),
                   "compression": {"data": describe_codec(s.coords_compression)}}
        else:
            a = field.attribute
            out = {"name": a.name, "stem": field.stem, "kind": "attribute", "index": field.idx,
                   "datatype": a.datatype.name, "cell_val_num": "var" if a.var_sized else a.cell_val_num,
                   "compression": {"data": describe_codec(a.compression)}}
            if a.var_sized:
                out["compression"] = {"offsets": describe_codec(a.offsets_compression),
                                      "var": describe_codec(a.compression)}
        out["data_files"] = {n: files.get(n) for n in
                             [field.name + ".tdb"] + ([field.name + "_var.tdb"] if field.var_sized else [])}
        out["tile_count"] = frag.tile_count()
        return out

    @staticmethod
    def describe_stream(frag: Legacy0xFragment, field, k: int, stream: str, loc, entry: dict) -> None:
        entry.update({"located_by": "book-keeping offsets" if loc.listed else "fixed position (uncompressed)",
                      "compression": describe_codec(frag.codec(field, stream))})
        tile = frag.tile(field, k, stream)
        entry["decoded"] = dict(tile.record)
        if stream == DATA and field.var_sized:
            stored = np.frombuffer(tile.data, "<u8")
            base = frag.var_base(field, k)
            entry["var_base"] = base
            entry["offsets_stored"] = stored.tolist()
            entry["offsets_tile_relative"] = (stored.astype(np.int64) - base).tolist()


LEGACY0X_VIEWS = Legacy0xViews()


def _mbrs(frag: Legacy0xFragment, key, fixed: bool) -> dict:
    """rtree/level_0.csv: the book-keeping keeps the MBR of every tile, no tree above them."""
    dims = frag.schema().dimensions
    header = ["mbr"] + [f"{d}_{end}" for d in dims for end in ("min", "max")]

    def render():
        mbrs = frag.book_keeping().mbrs
        return to_csv(header, ([i] + m.reshape(-1).tolist() for i, m in enumerate(mbrs)))

    return {"level_0.csv": BytesFile(guarded(render, frag.problems, frag.rel, "MBRs"),
                                     InCache(frag.store.cache, ("zero rtree", key), immutable=fixed),
                                     mtime=frag.mtime())}
