"""Arrays, groups and workspaces other projects wrote and committed to their public repositories.

They live under tests/data/world/<project>/ (each project's licence file beside its arrays); the
arrays of TileDB's own test/inputs and TileDB-Java's test resources are already part of the
back-compat corpus and are used from there. tests/data/SOURCES.md names each one's repository,
commit, path and licence. tests/test_world_arrays.py holds every item listed here to what it expects.

What each item is expected to be:
* HEALTHY: TileDB (tiledb-py) opens every array of it; tdbfs must agree with tiledb-py on fragments,
  non-empty domains, cells and group members, and be silent (`problems: []`, `tdbfs check` exit 0
  without a warning line), except for the `warnings` listed (files the project put in an array folder
  that TileDB ignores; VIEWS.md makes such a stray file a warning).
* LEGACY_0X: a TileDB 0.x workspace (GenomicsDB): no TileDB this suite can install reads it, so tdbfs
  is held to silence and to every file of its tree reading.
* REFUSED: TileDB refuses it (a format it cannot parse): every file either reads or fails for a reason
  that a problem names with its file and offset; `check` exits 1 saying why.
* DAMAGED_UPSTREAM: what the repository holds lost part of what TileDB wrote; the `problems` listed
  are the true alarms, and no others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

#: tests/data, found from wherever this module sits under tests/
DATA = next(p / "data" for p in Path(__file__).resolve().parents if (p / "data" / "SOURCES.md").is_file())
WORLD = DATA / "world"

HEALTHY = "healthy"
LEGACY_0X = "legacy-0x"
REFUSED = "refused"
DAMAGED_UPSTREAM = "damaged-upstream"


@dataclass(frozen=True)
class WorldItem:
    """One array, group or workspace as its project committed it."""

    path: str                 # under tests/data
    project: str              # owner/name of the repository it comes from
    kind: str                 # array | group | workspace
    expect: str               # HEALTHY | LEGACY_0X | REFUSED | DAMAGED_UPSTREAM
    formats: tuple = ()       # fragment format versions of the arrays in it (tiledb-py's FragmentInfo.version)
    warnings: tuple = ()      # (file, structure) of each warning expected (TileDB ignores that file)
    problems: tuple = ()      # DAMAGED_UPSTREAM / REFUSED: (file, structure) of each problem expected
    why: str = ""             # REFUSED: words the reason must contain
    note: str = field(default="", compare=False)

    @property
    def id(self) -> str:
        return self.path.replace("backcompat_arrays/", "bc/").replace("world/", "").replace("/", "-")

    @property
    def location(self) -> Path:
        return DATA / self.path


_README = (("README.md", "extra file"),)

ITEMS: tuple[WorldItem, ...] = (
    # --- TileDB-Inc/TileDB test/inputs ---------------------------------------------------------
    WorldItem("world/TileDB/group_v1", "TileDB-Inc/TileDB", "group", HEALTHY,
              note="group details format 1 with the version in the file name; an empty subgroup"),
    WorldItem("backcompat_arrays/v01/non_split_coords_v1_4_0", "TileDB-Inc/TileDB", "array", HEALTHY, (1,)),
    WorldItem("backcompat_arrays/v10/zero_var_chunks_v10", "TileDB-Inc/TileDB", "array", HEALTHY, (10,)),
    WorldItem("backcompat_arrays/v11_schema_only/sparse_array_v11", "TileDB-Inc/TileDB", "array", HEALTHY, ()),
    WorldItem("backcompat_arrays/v0_pre_format_1.3.0/dense_array_v1_3_0", "TileDB-Inc/TileDB", "array", REFUSED,
              problems=(("__array_schema.tdb", "array schema generic tile header"),),
              why="pre-format generic tile (TileDB <= 1.3)"),
    WorldItem("backcompat_arrays/experimental_UINT32_MAX/experimental_array_vUINT32_MAX", "TileDB-Inc/TileDB",
              "array", REFUSED, why="experimental TileDB build"),
    # --- TileDB-Inc/TileDB-Java src/test/resources/data ----------------------------------------
    WorldItem("backcompat_arrays/v02/quickstart_sparse_array", "TileDB-Inc/TileDB-Java", "array", HEALTHY, (2,)),
    # --- TileDB-Inc/TileDB-VCF libtiledbvcf/test/inputs/arrays ---------------------------------
    WorldItem("world/TileDB-VCF/v2_ingested_2samples", "TileDB-Inc/TileDB-VCF", "group", HEALTHY, (3,),
              note="marker-only group (before TileDB 2.9): a data array and a metadata group"),
    WorldItem("world/TileDB-VCF/v3_ingested_2samples", "TileDB-Inc/TileDB-VCF", "group", HEALTHY, (5,),
              note="marker-only group, 2020"),
    WorldItem("world/TileDB-VCF/v4_ingested_2samples", "TileDB-Inc/TileDB-VCF", "group", HEALTHY, (6,),
              note="marker-only group, 2020"),
    WorldItem("world/TileDB-VCF/v4_small.tdb", "TileDB-Inc/TileDB-VCF", "group", HEALTHY, (20,),
              note="group format 2 whose member vcf_headers lies in a marker-only subfolder; an array "
                   "without fragments"),
    WorldItem("world/TileDB-VCF/new_format", "TileDB-Inc/TileDB-VCF", "group", HEALTHY, (22,)),
    # --- single-cell-data/TileDB-SOMA ----------------------------------------------------------
    WorldItem("world/TileDB-SOMA/dim-uint64_attr-int64_10cells", "single-cell-data/TileDB-SOMA", "array",
              HEALTHY, (10,), warnings=_README),
    WorldItem("world/TileDB-SOMA/dim-uint64_attr-str_26cells", "single-cell-data/TileDB-SOMA", "array",
              HEALTHY, (10,), warnings=_README),
    WorldItem("world/TileDB-SOMA/ij_test1_ref", "single-cell-data/TileDB-SOMA", "array", DAMAGED_UPSTREAM,
              problems=(("__1646985592411_1646985592411_ae24ad838d364573982ef5f186456015_10.ok", "commit file"),),
              note="the repository keeps the commit (.ok) but not the fragment it commits (data/.gitignore "
                   "ignores everything not listed): TileDB opens it with 0 fragments"),
    WorldItem("world/TileDB-SOMA/soma-exp-pbmc-small_2023", "single-cell-data/TileDB-SOMA", "group", HEALTHY,
              (18,), note="SOMA experiment, members added by relative URI"),
    WorldItem("world/TileDB-SOMA/soma-exp-pbmc-small_2024", "single-cell-data/TileDB-SOMA", "group", HEALTHY,
              (22,), note="SOMA experiment with uns/, new shapes"),
    # --- TileDB-Inc/tiledbsc tests/testthat/test-data (SOMA's predecessor, R) -----------------
    WorldItem("world/tiledbsc/scdataset-pbmc-small_0-1-2", "TileDB-Inc/tiledbsc", "group", HEALTHY, (13,),
              note="group details format 1; members named apart from their folders (RNA -> scgroup_RNA); "
                   "an empty subgroup"),
    # --- TileDB-Inc/TileDB-R inst/sampledata ---------------------------------------------------
    WorldItem("world/TileDB-R/legacy_write_penguins", "TileDB-Inc/TileDB-R", "array", HEALTHY, (9,),
              note="nullable var-sized and fixed attributes"),
    # --- GenomicsDB/GenomicsDB src/test/inputs/test.tgz ----------------------------------------
    WorldItem("world/GenomicsDB/ws", "GenomicsDB/GenomicsDB", "workspace", LEGACY_0X),
    WorldItem("world/GenomicsDB/ws_new", "GenomicsDB/GenomicsDB", "workspace", LEGACY_0X),
    WorldItem("world/GenomicsDB/bgen_workspace_1", "GenomicsDB/GenomicsDB", "workspace", LEGACY_0X),
    WorldItem("world/GenomicsDB/rc_bed_workspace", "GenomicsDB/GenomicsDB", "workspace", LEGACY_0X,
              note="8 fragments"),
)


def items(*expect: str) -> list[WorldItem]:
    return [i for i in ITEMS if not expect or i.expect in expect]


def project_folders() -> list[Path]:
    """The folders under tests/data/world, one per source project."""
    return sorted(p for p in WORLD.iterdir() if p.is_dir())


def tree_bytes(path: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(path) for f in fs)
