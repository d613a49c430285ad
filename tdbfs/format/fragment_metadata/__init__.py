"""Fragment metadata (docs/format.md §5): `__fragment_metadata.tdb`, its footer and its sub-structures.

One module per structure, each decoding bytes the caller has already read:

* `fields` - the per-field index space of every list in the metadata (§5.1);
* `footer` - locating (§5.3) and decoding (§5.4) the footer;
* `rtree` - the R-tree generic tile (§5.5);
* `tile_lists` - the per-tile offsets, sizes, min/max, sums and null counts (§5.5);
* `fragment_summary` - the fragment-wide min/max/sum/null count (§5.5);
* `processed_conditions` - the delete/update commits already applied (§5.5);
* `legacy` - the whole-file generic tile of formats 1/2 (§5.7);
* `coords` - the legacy `__coords.tdb` of formats 1-4 (§5.2);
* `domain` - the (min, max) ranges the footer and formats 1/2 share.

This package is their face: importers use `from ..format import fragment_metadata as fm`
and `fm.<name>`, whichever module holds it.
"""

from ..datatypes import VAR_NUM
from .coords import coords_zipped, split_coords
from .fields import (ATTRIBUTE, COORDS, COORDS_NAME, DELETE_CONDITION_INDEX, DELETE_CONDITION_INDEX_NAME,
                     DELETE_TIMESTAMPS, DELETE_TIMESTAMPS_NAME, DIMENSION, TIMESTAMPS, TIMESTAMPS_NAME, Field,
                     FieldSpace, build_field_space, encode_v8_name, sum_dtype)
from .footer import (FRAGMENT_METADATA_FILE, LEGACY_SCHEMA_NAME, MAX_FOOTER_VERSION, Footer, GenericTileOffsets,
                     OptionalSection, computed_footer_size, footer_has_length_field, locate_footer, parse_footer,
                     peek_footer_schema_name, read_footer)
from .fragment_summary import FragmentFieldSummary, parse_fragment_min_max_sum_null_count
from .legacy import LegacyFragmentMetadata, legacy_footer, legacy_rtree, parse_legacy_fragment_metadata
from .processed_conditions import parse_processed_conditions
from .rtree import RTree, RTreeLevel, parse_rtree
from .tile_lists import count_u64_list, parse_tile_min_max, parse_tile_sums, parse_u64_list

__all__ = [
    "VAR_NUM",
    "coords_zipped", "split_coords",
    "ATTRIBUTE", "COORDS", "COORDS_NAME", "DELETE_CONDITION_INDEX", "DELETE_CONDITION_INDEX_NAME",
    "DELETE_TIMESTAMPS", "DELETE_TIMESTAMPS_NAME", "DIMENSION", "TIMESTAMPS", "TIMESTAMPS_NAME", "Field",
    "FieldSpace", "build_field_space", "encode_v8_name", "sum_dtype",
    "FRAGMENT_METADATA_FILE", "LEGACY_SCHEMA_NAME", "MAX_FOOTER_VERSION", "Footer", "GenericTileOffsets",
    "OptionalSection", "computed_footer_size", "footer_has_length_field", "locate_footer", "parse_footer",
    "peek_footer_schema_name", "read_footer",
    "FragmentFieldSummary", "parse_fragment_min_max_sum_null_count",
    "LegacyFragmentMetadata", "legacy_footer", "legacy_rtree", "parse_legacy_fragment_metadata",
    "parse_processed_conditions",
    "RTree", "RTreeLevel", "parse_rtree",
    "count_u64_list", "parse_tile_min_max", "parse_tile_sums", "parse_u64_list",
]
