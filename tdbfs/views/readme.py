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

  array.yaml              array-wide summary: path, checked: (how far its problem
                          list goes: array files, fragment metadata and tiles
                          checked, and the mount's background check), dense/sparse,
                          format versions, counts and sizes, problems found so
                          far, and hints: fragment_count, not_vacuumed,
                          overlapping_fragments, format (the oldest TileDB release
                          that reads it)
  schema/                 every schema file decoded (__schema/* and the legacy
                          __array_schema.tdb); current.yaml links to the latest;
                          enumerations/ holds the decoded __schema/__enumerations
  metadata/               array metadata: merged.yaml (all __meta files applied in
                          timestamp order, deletions applied, vacuumed files
                          skipped) and one YAML per __meta file
  commits/                every __commits file decoded (.wrt .del .upd .vac .ign .con)
  fragment_meta/          __fragment_meta/*.meta consolidated footers, decoded
  timeline.csv            one row per event the files record, in time order:
                          time_ms,time_utc,event,subject,file,t1,t2,into,detail;
                          times are the t2 of the recording file's name (TileDB
                          keeps no other time; mtimes are not TileDB times)
  as_of/<T>/              the array as a reader opening it at T ms sees it (any
                          whole number typed; the timeline's times are listed,
                          only the newest when the fragments/ folders of all
                          would hold more than 10,000 symlinks plus two per
                          fragment, so that find and ls -lR stay linear):
    fragments/            symlinks to exactly the fragments TileDB reads at T
    schema.yaml           the schema in force at T
    metadata.yaml         the metadata as of T, as metadata/merged.yaml
    reader.yaml           the schema file in force, fragments_read, and why
                          others are not: fragments_replaced (a .vac in range
                          lists them), fragments_missing (folder gone)
  stats.csv               per field per fragment: tile_count, cell_count,
                          stored_bytes (data files on disk), decoded_bytes (tile
                          files), ratio, filters; then field_total rows and the
                          array_total row (column `row` says which); from the
                          metadata alone, no tile decoded
  fragments.svg           each fragment's non-empty domain on the first two
                          dimensions (first down, second across), blue = oldest
                          to red = newest; thick black outline: written by
                          consolidation; faint dashed: waiting for vacuum;
                          hover for the fragment name
  fragments/<name>/       one folder per fragment, named as on disk:
    fragment.yaml         parsed name (t1, t2, uuid, version), dense/sparse, cell
                          and tile counts, non-empty domain, files, commit state,
                          problems
    footer.yaml           every footer field in spec order
    rtree/level_N.csv     R-tree MBRs; level_0 is the root, the last level has one
                          MBR per data tile
    rtree/mbrs.svg        those MBRs drawn as `tiledb info svg-mbrs` draws them
                          (leaves filled, levels above as outlines; sparse only)
    stats.csv             the rows of the top stats.csv for this fragment, with
                          its own totals
    tiles.csv             per data tile: offsets and sizes in every data file,
                          mins, maxes, sums and null counts; dense: then the
                          tile's domain, <dim>_lo,<dim>_hi per dimension
                          (whole tiles, so it may reach past the domain)
    attrs/<stem>/         per attribute data file stem (a0, a1, ...; t, dt, dci):
      info.yaml           attribute name, type, cell_val_num, nullable, filters
      tile_K.bin          tile K with every filter reversed (var-sized: the
                          tile's uint64 offsets, restarting at 0 in each tile)
      tile_K.var.bin      var-sized: tile K's values
      tile_K.validity.bin nullable: tile K's validity bytes (0 = null)
      tile_K.txt          tile K's cells, one JSON value per line
      tile_K.yaml         where tile K is on disk, its chunks, the filters
                          reversed and what each recorded, checksum results;
                          dense: domain:, dimension name -> [lo, hi] of tile K
    dims/<stem>/          the same for dimension files (d0, d1, ...)
    fields/<name>         symlink by field name to ../attrs/<stem> or
                          ../dims/<stem> ('%', '/', NUL, '.', '..' and the
                          empty name escaped as %25 %2F %00 %2E %2E%2E %)
    cells/tile_K.csv      tile K's cells, one row each: the coordinates by
                          dimension name, then every attribute by name, then
                          timestamp, delete_timestamp, delete_condition_index
                          (consolidated fragments; 18446744073709551615 = not
                          deleted); strings, var-sized values and cells of
                          several values (space-separated) double-quoted, `"`
                          doubled; numbers never quoted, so grep -r ',486,'
                          fragments/*/cells/ finds a coordinate; a nullable
                          attribute is followed by <name>.valid (1 or 0) and
                          a null cell's value is empty; dense: the cells of
                          the tile inside the fragment's non-empty domain, in
                          cell order, coordinates computed
    cells.csv             every tile's rows, in tile order, under one header;
                          its exact size is known once every tile has been
                          rendered, so ls -l of the fragment folder decodes
                          every tile
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

Groups
------
A mounted TileDB group (a folder with __tiledb_group.tdb, __group/, __meta/;
one written before TileDB 2.9 has only the marker, and its members are the
arrays and groups in its folder) shows instead:
  group.yaml              format version; members (name, type, uri as stored,
                          relative, location resolved, entry, details_file,
                          or `found` for a member of a marker-only group);
                          history: per __group file its timestamps and the
                          members it added, removed and listed again; problems
  group_details/          every __group file decoded (each member with its
                          payload offsets), with layout/ and hex/ byte maps
  metadata/               group metadata, as metadata/ of an array
  members/<name>/         the member's own tree (an array's or a group's, the
                          same as mounting it alone), read when first listed,
                          with the permissions of the member's own folder;
                          never reached through a symbolic link;
                          a member that cannot be read holds only problem.yaml;
                          a member leading back to a group above it is a
                          symbolic link to that group's folder here

Problems
--------
Each entry of a `problems` list has `file` (relative to the array folder),
`structure`, `offset` (a byte offset in that file; null only for a finding
about a whole file), `message` and `severity`: `error`, or `warning` for states
TileDB itself ignores (extra files). A state TileDB means to leave (fragments
consolidated but not yet vacuumed, deleted cells, an evolved schema) is a hint
of array.yaml, not a problem.
  * Complete from the first read: what the folder listings, lstat and the
    footers show (commit state, missing and extra files, file sizes against
    the footer, entries that are not regular files). fragment.yaml and
    array.yaml are rendered again whenever what they show may have changed
    (array.yaml, stats.csv, timeline.csv and fragments.svg: a fragment, commit,
    schema or metadata file came or went, a fragment not yet committed
    changed, a problem was found), and a read always returns one whole
    rendering, of the size stat gave.
  * Found so far: what only decoding shows (a tile whose checksum fails, a
    corrupt generic tile). It is added as views are read, and a local mount
    looks for it by itself: once live, it checks in the background every
    structure `tdbfs check` checks but the data tiles (schemas, commits,
    metadata, every fragment's footer and metadata tiles), one fragment at a
    time whenever no request is being served (-o check=full: the data tiles
    too; -o check=off: nothing; off by default in an object store, where each
    read is a request). array.yaml's `checked:` says how far that has got
    (`metadata: 40 of 40 fragments`, `tiles: 0 of 40 fragments`, `background:
    metadata, done`); once every file of the tree has been read, or a full
    check is done, array.yaml lists exactly what `tdbfs check` lists.
Symbolic links, FIFOs, sockets and devices inside the array are never
followed or opened: they are listed under `special_files` in fragment.yaml and
as problems, and raw/ holds only regular files.

Fragments that are not committed yet (no commit file: possibly still being
written) are read afresh whenever their files change; committed fragments never
change, and what is decoded from them is kept.
"""
