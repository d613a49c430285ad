"""YAML of simple plain data, written without PyYAML, to the byte of what PyYAML writes.

Importing PyYAML costs 40-50 ms, more than the first `footer.yaml` of a fresh mount may
take (README "Performance", figure 3). Footers, like most summaries, hold only dicts, lists,
ints, booleans, nulls, plain floats and names such as `__1_1_<uuid>_22`. `simple_yaml`
writes those as `render.to_yaml`'s dumper does (block mappings, indentless block sequences,
flow lists of at most 16 scalars wrapped past column 120) and gives up on anything else
(quoted or multi-line strings, long keys, other types), which PyYAML then writes.
`tests/test_startup.py` holds it to PyYAML's output.
"""

from __future__ import annotations

import math
import re

#: strings PyYAML writes plain and reads back as strings: a letter or `_` first (so never
#: a number, a date or an indicator), then no character that needs quotes
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
#: the words YAML 1.1 reads as booleans or null (PyYAML's resolver)
_RESERVED = frozenset(
    "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF null Null NULL".split())
#: floats whose repr PyYAML's resolver reads back as floats, so it writes them untagged
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]*(?:e[-+][0-9]+)?\Z")
_WIDTH = 120          # render.to_yaml's width
_FLOW_ITEMS = 16      # render._represent_list: longer lists, or lists of lists or dicts, are block
_SIMPLE_KEY = 128     # PyYAML writes a key this long or longer as `? key`


class _NotSimple(Exception):
    pass


def simple_yaml(data) -> str | None:
    """`data` (a dict or list, after `render.plain`) as PyYAML writes it, or None when it holds
    something only PyYAML writes."""
    if not isinstance(data, (dict, list)):
        return None
    out = _Writer()
    try:
        if _is_flow(data):
            out.flow(data, 2)
        elif isinstance(data, dict):
            out.mapping(data, 0, inline=False)
        else:
            out.sequence(data, 0, inline=False)
    except _NotSimple:
        return None
    out.write("\n")
    return "".join(out.parts)


def _scalar(value) -> str:
    kind = type(value)
    if kind is str:
        if _PLAIN.match(value) and value not in _RESERVED:
            return value
    elif kind is bool:
        return "true" if value else "false"
    elif kind is int:
        return str(value)
    elif value is None:
        return "null"
    elif kind is float:
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if _FLOAT.match(text):
            return text
    raise _NotSimple


def _is_flow(value) -> bool:
    return (isinstance(value, dict) and not value) or (
        isinstance(value, list) and len(value) <= _FLOW_ITEMS
        and not any(isinstance(v, (list, dict)) for v in value))


class _Writer:
    """Follows PyYAML's emitter: `column` decides where a flow list wraps."""

    def __init__(self):
        self.parts: list[str] = []
        self.column = 0

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.column = 0 if text == "\n" else self.column + len(text)

    def newline(self, indent: int) -> None:
        if self.parts:
            self.write("\n")
        self.write(" " * indent)

    def flow(self, value, indent: int) -> None:
        """`[a, b, ...]` or `{}`; past column 120 the next item starts a line at `indent`."""
        if isinstance(value, dict):
            self.write("{}")
            return
        self.write("[")
        for n, item in enumerate(value):
            text = _scalar(item)
            if n:
                self.write(",")
            if self.column > _WIDTH:
                self.write("\n")
                self.write(" " * indent)
            elif n:
                self.write(" ")
            self.write(text)
        self.write("]")

    def mapping(self, value: dict, indent: int, inline: bool) -> None:
        """Block mapping with keys at column `indent`; `inline`: the first key follows `- `."""
        for n, (key, item) in enumerate(value.items()):
            if type(key) is not str or len(key) >= _SIMPLE_KEY:
                raise _NotSimple
            if n or not inline:
                self.newline(indent)
            self.write(_scalar(key) + ":")
            self.node(item, indent, in_mapping=True)

    def sequence(self, value: list, indent: int, inline: bool) -> None:
        """Block sequence with its `-` at column `indent`; `inline`: the first follows `- `."""
        for n, item in enumerate(value):
            if n or not inline:
                self.newline(indent)
            self.write("-")
            self.node(item, indent, in_mapping=False)

    def node(self, value, indent: int, in_mapping: bool) -> None:
        """A value after `key:` or `-`, in the block collection whose entries start at `indent`."""
        if _is_flow(value):
            self.write(" ")
            self.flow(value, indent + 2)
        elif isinstance(value, dict):
            if in_mapping:
                self.mapping(value, indent + 2, inline=False)
            else:
                self.write(" ")
                self.mapping(value, indent + 2, inline=True)
        elif isinstance(value, list):
            if in_mapping:      # PyYAML indents no block sequence under a key
                self.sequence(value, indent, inline=False)
            else:
                self.write(" ")
                self.sequence(value, indent + 2, inline=True)
        else:
            self.write(" " + _scalar(value))
