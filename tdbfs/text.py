"""Text as every front end shows it."""

from __future__ import annotations


def shown(name: str) -> str:
    """A name as text: a file name that is not UTF-8 (the OS hands it over with surrogate escapes)
    gets \\xNN escapes for its odd bytes, so every YAML and CSV stays valid UTF-8."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        try:
            return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return name.encode("utf-8", "backslashreplace").decode("utf-8")


_ESCAPE = {"%": "%25", "/": "%2F", "\0": "%00"}


def escape_name(name: str) -> str:
    """A name (a 0.x array's or field's, any field's under fields/) as a file name: '%', '/' and NUL
    percent-escaped; '.' and '..' too."""
    out = "".join(_ESCAPE.get(ch, ch) for ch in name)
    if out in (".", ".."):
        out = out.replace(".", "%2E")
    return out or "%"
