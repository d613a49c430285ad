"""Pictures a browser shows, written by hand as SVG: `fragments.svg` (each fragment's non-empty domain on
the first two dimensions, coloured by time) and `fragments/<f>/rtree/mbrs.svg` (the R-tree's MBRs).

Both draw the first dimension down and the second across, as TileDB's `tiledb info svg-mbrs` does
(tools/src/commands/info_command.cc, `write_svg_mbrs`: a 600 x 600 px plot, an integer range [lo, hi]
covering hi - lo + 1 units). A 1-D array gets one strip per fragment (per R-tree level). Every shape
has a `<title>` (a browser shows it on hover) and a class saying what it is, for scripts:
`fragment` (with `consolidated`, `to-vacuum`, `uncommitted`) and `mbr level-N` (`leaf` for the last level).
"""

from __future__ import annotations

import re

from ..lazy import np
from ..store.fragment_overview import fragment_overviews
from .common import guarded
from .describe.fragment_metadata import describe_rtree_level
from .array_views import summary_file
from .nodes import BytesFile, InCache
from ..text import shown

PLOT = 600                  # TileDB's default --width and --height
LEFT, TOP, RIGHT, BOTTOM = 80, 40, 30, 110


def fragments_svg_file(store) -> BytesFile:
    """Fragments come and go: rendered again when they do (array_views.summary_file), from the footers."""
    return summary_file(store, lambda: fragments_svg(store), "fragments picture")


def mbrs_svg_file(frag, rtree, key, fixed: bool) -> BytesFile:
    return BytesFile(guarded(lambda: mbrs_svg(frag, rtree), frag.problems, frag.rel, "R-tree"),
                     InCache(frag.store.cache, ("mbrs.svg", key), immutable=fixed), mtime=frag.mtime())


# -- fragments.svg ---------------------------------------------------------------------------------

def fragments_svg(store) -> bytes:
    overviews = fragment_overviews(store)
    drawn = [o for o in overviews if o.domain]
    svg = _Svg(f"fragments of {store.path}")
    if not drawn:
        svg.note(TOP + PLOT // 2, f"{len(overviews)} fragments, none with a non-empty domain to draw")
        return svg.done()
    dims = drawn[-1].dimensions
    times = [o.t1 for o in drawn if o.t1 is not None]
    oldest, newest = (min(times), max(times)) if times else (0, 0)
    if len(dims) >= 2:
        down, across = _Axis([o.domain[0] for o in drawn]), _Axis([o.domain[1] for o in drawn])
        svg.axes(down, across, dims[0], dims[1])
    else:
        across = _Axis([o.domain[0] for o in drawn])
        svg.axes(None, across, "fragment", dims[0] if dims else "")
    for i, o in enumerate(drawn):
        x0, x1 = across.span(*o.domain[0 if len(dims) < 2 else 1])
        if len(dims) >= 2:
            y0, y1 = down.span(*o.domain[0])
        else:
            y0, y1 = i / len(drawn), (i + 1) / len(drawn)
        colour = _time_colour(o.t1, oldest, newest)
        classes = ["fragment"] + [c for c, on in (("consolidated", o.consolidated), ("to-vacuum", o.to_vacuum),
                                                  ("uncommitted", not o.committed)) if on]
        style = f"fill:{colour};fill-opacity:{0.12 if o.to_vacuum else 0.45};stroke:" + (
            "black;stroke-width:3" if o.consolidated else f"{colour};stroke-width:1")
        if o.to_vacuum or not o.committed:
            style += ";stroke-dasharray:6 3"
        svg.rect(x0, y0, x1, y1, style, " ".join(classes), _fragment_title(o))
    legend = [f"{len(drawn)} fragment{'s' if len(drawn) != 1 else ''} drawn" + (f", {len(overviews) - len(drawn)} without a non-empty domain or "
                                                 "unreadable" if len(overviews) > len(drawn) else ""),
              f"colour: first write time, blue {_iso(oldest)} to red {_iso(newest)}",
              "thick black outline: written by consolidation",
              "faint and dashed: consolidated into another fragment, waiting for vacuum (readers skip it)",
              "hover a rectangle for its fragment name, times and domain"]
    svg.legend(legend)
    return svg.done()


def _fragment_title(o) -> str:
    lines = [o.name, f"t1..t2: {o.t1}..{o.t2} ms ({_iso(o.t1)} .. {_iso(o.t2)})"]
    lines.append(", ".join(f"{d} [{_value(lo)}, {_value(hi)}]" for d, (lo, hi) in zip(o.dimensions, o.domain)))
    lines += [w for w, on in (("written by consolidation", o.consolidated),
                              ("consolidated into another fragment: waiting for vacuum", o.to_vacuum),
                              ("not committed", not o.committed)) if on]
    return "\n".join(lines)


def _time_colour(t, oldest, newest) -> str:
    """Blue for the oldest write, through green, to red for the newest."""
    f = 1.0 if t is None or newest == oldest else (t - oldest) / (newest - oldest)
    hue = 240 * (1 - f)
    return _hsl(hue, 0.75, 0.45)


def _hsl(h: float, s: float, l: float) -> str:
    c = (1 - abs(2 * l - 1)) * s
    x = c * (1 - abs((h / 60) % 2 - 1))
    m = l - c / 2
    r, g, b = [(c, x, 0), (x, c, 0), (0, c, x), (0, x, c), (x, 0, c), (c, 0, x)][int(h // 60) % 6]
    return "rgb({}, {}, {})".format(*(round((v + m) * 255) for v in (r, g, b)))


# -- rtree/mbrs.svg --------------------------------------------------------------------------------

def mbrs_svg(frag, rtree) -> bytes:
    dims = [name for name, _ in frag.dimensions()]
    levels = [describe_rtree_level(rtree, lv) for lv in range(len(rtree.levels))]
    svg = _Svg(f"R-tree of {frag.name}")
    if not levels or not levels[-1]:
        svg.note(TOP + PLOT // 2, "no MBRs: the fragment's R-tree is empty")
        return svg.done()
    leaves = levels[-1]
    # TileDB's colours: blue, its green part stepping by 255 / (number of MBRs) from one leaf to the next
    g_inc = max(1, 0xFF // len(leaves))
    if len(dims) >= 2:
        down, across = _Axis([(r[0], r[1]) for r in leaves]), _Axis([(r[2], r[3]) for r in leaves])
        svg.axes(down, across, dims[0], dims[1])
    else:
        across = _Axis([(r[0], r[1]) for r in leaves])
        svg.axes(None, across, "R-tree level", dims[0] if dims else "")
    for lv, rows in enumerate(levels):
        leaf = lv == len(levels) - 1
        for i, r in enumerate(rows):
            x0, x1 = across.span(r[2], r[3]) if len(dims) >= 2 else across.span(r[0], r[1])
            if len(dims) >= 2:
                y0, y1 = down.span(r[0], r[1])
            else:
                y0, y1 = lv / len(levels), (lv + 1) / len(levels)
            style = (f"fill:rgb(0, {(i * g_inc) % 0xFF}, 255);stroke:none;fill-opacity:0.5" if leaf
                     else f"fill:none;stroke:rgb(255, {80 * lv % 200}, 0);stroke-width:{max(1, 3 - lv)}")
            title = f"level {lv}, MBR {i}: " + ", ".join(
                f"{d} [{_value(r[2 * j])}, {_value(r[2 * j + 1])}]" for j, d in enumerate(dims))
            svg.rect(x0, y0, x1, y1, style, f"mbr level-{lv}" + (" leaf" if leaf else ""), title)
    svg.legend([f"{len(levels)} levels, {sum(map(len, levels))} MBRs, {len(leaves)} leaves (one per data tile; "
                "filled as TileDB's `tiledb info svg-mbrs` fills them)",
                "outlines: the MBRs of the levels above (level 0 is the root)",
                "hover a rectangle for its level, index (the row of rtree/level_N.csv) and ranges"])
    return svg.done()


# -- drawing ---------------------------------------------------------------------------------------

class _Axis:
    """Where a dimension's values fall on [0, 1]: numbers linearly (an integer range [lo, hi] covering
    hi - lo + 1 units, as cells do), strings by their rank among the bounds drawn."""

    def __init__(self, ranges):
        values = [v for r in ranges for v in r]
        self.numeric = all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in values)
        if self.numeric:
            self.cells = all(isinstance(v, (int, np.integer)) for v in values)
            self.lo = float(min(values))
            self.hi = float(max(values)) + (1 if self.cells else 0)
        else:
            self.cells = True
            self.ranks = {v: r for r, v in enumerate(sorted(set(values), key=_value))}
            self.lo, self.hi = 0.0, float(len(self.ranks))
        if self.hi <= self.lo:
            self.hi = self.lo + 1
        self.first, self.last = (min(values), max(values)) if self.numeric else \
            (min(values, key=_value), max(values, key=_value))

    def span(self, lo, hi) -> tuple[float, float]:
        a, b = (float(lo), float(hi)) if self.numeric else (self.ranks[lo], self.ranks[hi])
        b += 1 if self.cells else 0
        width = self.hi - self.lo
        return (a - self.lo) / width, (b - self.lo) / width


class _Svg:
    def __init__(self, title: str):
        self.parts = [
            '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n',
            f'<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{LEFT + PLOT + RIGHT}px" '
            f'height="{TOP + PLOT + BOTTOM}px" viewBox="0 0 {LEFT + PLOT + RIGHT} {TOP + PLOT + BOTTOM}">\n',
            f"<title>{_text_node(title)}</title>\n",
            f'<rect class="background" x="0" y="0" width="{LEFT + PLOT + RIGHT}" height="{TOP + PLOT + BOTTOM}" '
            'style="fill:white"/>\n',
            f'<text x="{LEFT}" y="{TOP - 14}" style="font:bold 12px sans-serif">{_text_node(title)}</text>\n',
            f'<rect class="plot" x="{LEFT}" y="{TOP}" width="{PLOT}" height="{PLOT}" '
            'style="fill:none;stroke:rgb(200, 200, 200)"/>\n',
            "<g>\n",
        ]

    def axes(self, down: _Axis | None, across: _Axis, down_name: str, across_name: str) -> None:
        font = "font:12px sans-serif"
        self.parts.append(f'<text class="axis" x="{LEFT}" y="{TOP + PLOT + 16}" style="{font}">'
                          f"{_text_node(_value(across.first))}</text>\n")
        self.parts.append(f'<text class="axis" x="{LEFT + PLOT}" y="{TOP + PLOT + 16}" style="{font};'
                          f'text-anchor:end">{_text_node(_value(across.last))}</text>\n')
        self.parts.append(f'<text class="axis" x="{LEFT + PLOT / 2}" y="{TOP + PLOT + 16}" style="{font};'
                          f'text-anchor:middle">{_text_node(across_name)} →</text>\n')
        if down is not None:
            self.parts.append(f'<text class="axis" x="{LEFT - 4}" y="{TOP + 10}" style="{font};text-anchor:end">'
                              f"{_text_node(_value(down.first))}</text>\n")
            self.parts.append(f'<text class="axis" x="{LEFT - 4}" y="{TOP + PLOT}" style="{font};text-anchor:end">'
                              f"{_text_node(_value(down.last))}</text>\n")
        self.parts.append(f'<text class="axis" x="{LEFT - 4}" y="{TOP + PLOT / 2}" style="{font};text-anchor:end">'
                          f"{_text_node(down_name)} ↓</text>\n")

    def rect(self, x0: float, y0: float, x1: float, y1: float, style: str, classes: str, title: str) -> None:
        x, y = LEFT + PLOT * x0, TOP + PLOT * y0
        w, h = max(PLOT * (x1 - x0), 0.5), max(PLOT * (y1 - y0), 0.5)  # a point still shows
        self.parts.append(f'<rect class="{classes}" x="{x:.3f}" y="{y:.3f}" width="{w:.3f}" height="{h:.3f}" '
                          f'style="{style}"><title>{_text_node(title)}</title></rect>\n')

    def note(self, y: int, text: str) -> None:
        self.parts.append(f'<text x="{LEFT + PLOT / 2}" y="{y}" style="font:14px sans-serif;text-anchor:middle">'
                          f"{_text_node(text)}</text>\n")

    def legend(self, lines: list[str]) -> None:
        for i, line in enumerate(lines):
            self.parts.append(f'<text class="legend" x="{LEFT}" y="{TOP + PLOT + 40 + 16 * i}" '
                              f'style="font:12px sans-serif">{_text_node(line)}</text>\n')

    def done(self) -> bytes:
        return ("".join(self.parts) + "</g>\n</svg>\n").encode("utf-8")


#: characters XML 1.0 cannot hold, shown as \xNN (string dimension values may have any byte)
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text_node(s: str) -> str:
    # (xml.sax.saxutils would import urllib and hashlib into every daemon at start-up)
    s = _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", shown(s))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _value(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="backslashreplace")
    return str(v.item() if isinstance(v, np.generic) else v)


def _iso(ms) -> str:
    import datetime
    if ms is None:
        return "?"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return str(ms)
