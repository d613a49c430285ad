"""Per field per fragment: tiles, cells, bytes stored and bytes decoded, from the files and the fragment
metadata alone (what TileDB's `tiledb info tile-sizes` totals per attribute, tools/src/commands/info_command.cc).

No tile is read or decoded: stored bytes are the data files' sizes in the folder listing, decoded bytes
are what the metadata records of each tile (store/fragment_interface.py `unfiltered_size`): cells x cell
size for fixed-size data, 8 bytes a cell for var-sized offsets, one byte a cell for validity, and the
footer's tile var sizes (0.x: the book-keeping's) for var-sized values.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fragment_interface import DATA, LEGACY0X, STREAM_SUFFIX, VALIDITY, VAR, streams


@dataclass(frozen=True, slots=True)
class FieldStats:
    field: str          # the attribute's or dimension's name (__coords: all dimensions of formats 1-4 and 0.x)
    stem: str           # its folder under attrs/ or dims/
    kind: str
    tile_count: int
    cell_count: int
    stored_bytes: int   # its data files (fixed or offsets, var, validity) on disk
    decoded_bytes: int  # its tiles with every filter reversed: the sizes of its tile_K[.var|.validity].bin
    filters: str        # the pipelines in words, per stream when there are several


def fragment_stats(frag) -> tuple[FieldStats, ...]:
    """One FieldStats per stored field of `frag`, kept in the store's cache while the fragment's files
    stay as they are (a committed fragment's for good)."""
    key = ("field stats", frag.store.path, frag.rel, frag.cache_token())
    return frag.store.cache.get_or_make(key, lambda: _with_cost(field_stats(frag)))


def _with_cost(stats: tuple) -> tuple[tuple, int]:
    return stats, 256 + 320 * len(stats)


def field_stats(frag) -> tuple[FieldStats, ...]:
    """One FieldStats per stored field of `frag`, computed now."""
    sizes = dict(frag.files())
    out = []
    for field in frag.stored_fields():
        ntiles = frag.tile_count(field.idx)
        # every tile holds a full tile's cells but the last (both layouts): no loop over 100,000 tiles
        cells = 0 if ntiles == 0 else (ntiles - 1) * frag.cells_per_full_tile() + frag.tile_cell_num(ntiles - 1)
        stored = decoded = 0
        for stream in streams(field):
            size = sizes.get(_data_file(frag, field, stream), 0)
            stored += size
            if frag.layout == LEGACY0X and stream == VAR and not _var_tiles_listed(frag, field):
                # uncompressed 0.x values: stored as decoded, and only the offsets tiles would say where
                # each tile starts (docs/format-0x.md)
                decoded += size
            else:
                decoded += sum(frag.unfiltered_size(field, k, stream) for k in range(ntiles))
        out.append(FieldStats(field.name, field.stem, field.kind, ntiles, cells, stored, decoded,
                              _filters(frag, field)))
    return tuple(out)


def _data_file(frag, field, stream: str) -> str:
    """The name of a stream's data file in the fragment folder."""
    if frag.layout == LEGACY0X:
        return field.name + ("_var.tdb" if stream == VAR else ".tdb")
    return field.stem + STREAM_SUFFIX[stream]


def _var_tiles_listed(frag, field) -> bool:
    return len(frag.book_keeping().tile_var_offsets[field.idx]) > 0


#: how each stream is named when a field has several
_STREAM_WORD = {DATA: "offsets", VAR: "values", VALIDITY: "validity"}


def _filters(frag, field) -> str:
    """`ZSTD(level=5)` for one stream; `offsets: ...; values: ...; validity: ...` for several. Filters are
    in pipeline order (the order a writer applies them), joined by `|`; `NONE` for an empty pipeline."""
    words = {stream: _stream_filters(frag, field, stream) for stream in streams(field)}
    if len(words) == 1:
        return words[DATA]
    names = dict(_STREAM_WORD, **({} if field.var_sized else {DATA: "data"}))
    return "; ".join(f"{names[s]}: {w}" for s, w in words.items())


def _stream_filters(frag, field, stream: str) -> str:
    if frag.layout == LEGACY0X:
        return _codec_words(frag.codec(field, stream))
    return _pipeline_words(frag.pipeline(field, stream), frag.encrypted())


#: pipeline object id -> (the pipeline, encrypted, its words): the fragments of one schema share its
#: pipelines, and a pass over 100,000 of them would spell each out 100,000 times
_WORDS: dict = {}
_WORDS_KEPT = 256


def _pipeline_words(pipeline, encrypted: bool) -> str:
    hit = _WORDS.get((id(pipeline), encrypted))
    if hit is not None and hit[0] is pipeline:
        return hit[1]
    names = [_filter_words(f) for f in pipeline.filters]
    if encrypted:
        names.append("AES_256_GCM")  # implicit last filter of every data tile of an encrypted array
    words = "|".join(names) or "NONE"
    if len(_WORDS) >= _WORDS_KEPT:
        _WORDS.clear()
    _WORDS[(id(pipeline), encrypted)] = (pipeline, words)   # the pipeline held: its id is not reused
    return words


def _filter_words(spec) -> str:
    options = {k: v for k, v in spec.options.items() if k != "compressor"}  # a compressor's own name again
    if not options:
        return spec.name
    return f"{spec.name}(" + " ".join(f"{k}={_option(v)}" for k, v in options.items()) + ")"


def _option(v) -> str:
    return getattr(v, "name", None) or str(v)


def _codec_words(codec) -> str:
    """A 0.x compression byte: its pre-filter, then its compressor."""
    pre = ["DELTA"] if codec.delta else ["BITSHUFFLE"] if codec.bitshuffle else []
    level = f"(level={codec.level})" if codec.level is not None and codec.compressed else ""
    return "|".join(pre + [codec.compressor_name + level])
