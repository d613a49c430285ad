"""One module per family of filters, each holding the reversers of docs/format.md §3.3-§3.4.

A reverser is `reverse(spec, md, data, stage) -> (md, data, record)`: it takes the
chunk's current metadata and data (memoryviews), undoes its filter, and returns
what the previous filter produced plus a record of the header fields it found,
by name, for `tile_K.yaml`. `stage` (a `Stage`) says what the filter saw.
A record key starting with "_" is for the caller, not the view ("_failures").
"""
