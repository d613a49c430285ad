"""The text of README.txt at the root of every mount."""

README_TEXT = """\
tdbfs: a read-only view of a TileDB array's on-disk structures
================================================================

Every file here is computed from the array's own files on demand; nothing is
ever written to the array. Sizes are exact, so cat, less, cp, grep, diff, jq and
yq work on every file. A file that cannot be built (corrupt or truncated input,
an unknown filter, a missing key) reads as an I/O error; the reason, with the file and byte
offset, is listed under `problems` in array.yaml and in the fragment's
fragment.yaml.

  array.yaml              array-wide summary: path, dense/sparse, format versions,
                          counts and sizes, problems found so far
  schema/                 every schema file decoded (__schema/* and the legacy
                          __array_schema.tdb); current.yaml links to the latest;
                          enumerations/ holds the decoded __schema/__enumerations
  metadata/               array metadata: merged.yaml (all __meta files applied in
                          timestamp order, deletions applied, vacuumed files
                          skipped) and one YAML per __meta file
  commits/                every __commits file decoded (.wrt .del .upd .vac .ign .con)
  fragment_meta/          __fragment_meta/*.meta consolidated footers, decoded
  fragments/<name>/       one folder per fragment, named as on disk:
    fragment.yaml         parsed name (t1, t2, uuid, version), dense/sparse, cell
                          and tile counts, non-empty domain, files, commit state,
                          problems
    footer.yaml           every footer field in spec order
    rtree/level_N.csv     R-tree MBRs; level_0 is the root, the last level has one
                          MBR per data tile
    tiles.csv             per data tile: offsets and sizes in every data file,
                          mins, maxes, sums and null counts
    attrs/<stem>/         per attribute data file stem (a0, a1, ...; t, dt, dci):
      info.yaml           attribute name, type, cell_val_num, nullable, filters
      tile_K.bin          tile K with every filter reversed (var-sized: the
                          tile's uint64 offsets, restarting at 0 in each tile)
      tile_K.var.bin      var-sized: tile K's values
      tile_K.validity.bin nullable: tile K's validity bytes (0 = null)
      tile_K.txt          tile K's cells, one JSON value per line
      tile_K.yaml         where tile K is on disk, its chunks, the filters
                          reversed and what each recorded, checksum results
    dims/<stem>/          the same for dimension files (d0, d1, ...)
    raw/                  the fragment's files, byte for byte
    layout.csv            byte map of every file of the fragment, one row per
                          byte range: file,start,end,length,structure,detail
                          (end exclusive); each file's rows cover it from 0 to
                          its size with no gap: generic tile header fields,
                          nchunks, chunk K header/metadata/data, footer fields,
                          and `unclaimed` (bytes no structure holds: gaps,
                          garbage after the last structure), `overlap` (bytes
                          two structures claim), `undecodable` (the rest of a
                          structure that stops decoding; the detail says why
                          and at which byte)
    layout/<file>.csv     the same rows for one file, without the file column
    hex/<name>.txt        hexdump -C of each generic tile of
                          __fragment_metadata.tdb (rtree, tile_offsets_I, ...,
                          named after the footer field, [I] written _I) and of
                          footer.txt; offsets are file offsets, and lines
                          starting with "# @start-end" name the byte map ranges
                          that start in the next line

Tile numbers K start at 0 and follow the order of tiles in the data file.

Problems
--------
Each entry of a `problems` list has `file` (relative to the array folder),
`structure`, `offset` (a byte offset in that file; null only for a finding
about a whole file), `message` and `severity`: `error`, or `warning` for states
TileDB itself leaves behind or ignores (extra files, fragments consolidated but
not yet vacuumed).
  * Complete from the first read: what the folder listings, lstat and the
    footers show (commit state, missing and extra files, file sizes against
    the footer, entries that are not regular files). fragment.yaml and
    array.yaml are rendered again whenever they are opened or stat'ed, and a
    read always returns one whole rendering, of the size stat gave.
  * Found so far: what only decoding shows (a tile whose checksum fails, a
    corrupt generic tile). It is added as views are read; once every file of
    the tree has been read, array.yaml lists exactly what `tdbfs check` lists.
Symbolic links, FIFOs, sockets and devices inside the array are never
followed or opened: they are listed under `special_files` in fragment.yaml and
as problems, and raw/ holds only regular files.

Fragments that are not committed yet (no commit file: possibly still being
written) are read afresh whenever their files change; committed fragments never
change, and what is decoded from them is kept.
"""
