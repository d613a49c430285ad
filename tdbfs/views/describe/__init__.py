"""Presentation: decoded structures of `tdbfs.format` as plain data for the YAML and CSV views.

Decoding says what the bytes hold; describing says how a view shows it (which keys,
in which order, values made YAML-safe, fields a version lacks left out). Kept apart,
as pyelftools keeps its `descriptions` apart from its parsers, a decoder can serve the
store, the byte maps and `tdbfs check` without carrying one view's choices, and a
view's wording can change without touching a decoder. `describe` imports `format`;
`format` never imports `describe`.

Convention: one module per format chapter, named after the `format` module it
presents; each public function is `describe_<structure>(decoded, plain values...)`,
takes structures already decoded (never bytes, a file or the store), and returns
plain data: dicts, lists, str, int, float, bool, None.
"""
