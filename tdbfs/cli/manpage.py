"""The man page tdbfs(1), made from the command line parser: every command with its synopsis,
description, options and examples, as `tdbfs COMMAND --help` has them.

    python -m tdbfs.cli.manpage > docs/tdbfs.1      (scripts/manpage)

docs/tdbfs.1 is committed and installed into share/man/man1 (pyproject.toml); a test compares it
with what this module makes now, so it cannot go stale. The output depends on nothing but the parser
and the version: no date, no terminal width."""

from __future__ import annotations

import sys

from .parser_info import Command, Option, Positional, commands, one_line, top_options

_ENVIRONMENT = (
    ("TDBFS_KEY_FILE", "the file holding the key of an encrypted array, when --key-file is not given"),
    ("TDBFS_ENCRYPTION_KEY", "the key itself, when neither --key-file nor TDBFS_KEY_FILE is given"),
    ("AWS_*, AWS_PROFILE, AWS_ENDPOINT_URL", "credentials and endpoint of s3:// URLs (the SDK's own chain)"),
    ("GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST", "credentials and endpoint of gs:// URLs"),
    ("AZURE_STORAGE_*", "credentials of az:// and abfs:// URLs"),
)

_SEE_ALSO = ("fusermount3(1), mount.fuse3(8), fstab(5). README.md and docs/ of the tdbfs sources: the tour "
             "of the tree, broken arrays, object stores, groups, the command line and the library.")


def _text(text: str) -> str:
    """roff-safe text: backslashes escaped, and no line starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in text.split("\n"))


def _flag(flag: str) -> str:
    return "\\fB" + flag.replace("-", "\\-") + "\\fR"


def _option_synopsis(o: Option) -> str:
    value = f" \\fI{_text(o.metavar)}\\fR" if o.metavar else ""
    return "[" + " | ".join(_flag(f) for f in o.flags) + value + "]"


def _positional_synopsis(p: Positional) -> str:
    name = f"\\fI{_text(p.metavar)}\\fR"
    return f"[{name}]" if p.optional else name


def _synopsis(c: Command) -> str:
    parts = [_option_synopsis(o) for o in c.options if o.flags[0] not in ("-h",)]
    parts += [_positional_synopsis(p) for p in c.positionals]
    return f"\\fBtdbfs {c.name}\\fR " + " ".join(parts)


def _literal(text: str) -> list[str]:
    """A block kept as written (examples, option lists of an epilog)."""
    return [".nf", _text(text.rstrip("\n")), ".fi"]


def _command(c: Command) -> list[str]:
    title = c.name + (f" (alias: {', '.join(c.aliases)})" if c.aliases else "")
    out = [f".SS {_text(title)}", ".PP", _synopsis(c), ".PP", _text(one_line(c.description or c.help))]
    for p in c.positionals:
        if p.help:
            out += [".TP", f"\\fI{_text(p.metavar)}\\fR", _text(p.help)]
    for o in c.options:
        if o.flags[0] == "-h":
            continue
        value = f" \\fI{_text(o.metavar)}\\fR" if o.metavar else ""
        out += [".TP", ", ".join(_flag(f) for f in o.flags) + value, _text(o.help)]
    if c.epilog:
        out += [".PP"] + _literal(c.epilog)
    return out


def manpage(parser) -> str:
    from .. import __version__
    out = [
        '.\\" Made by tdbfs/cli/manpage.py from the command line parser: edit the parser, then run scripts/manpage.',
        f'.TH TDBFS 1 "" "tdbfs {__version__}" "User Commands"',
        ".SH NAME",
        "tdbfs \\- a read\\-only view of TileDB arrays and groups as decoded files",
        ".SH SYNOPSIS",
    ]
    cmds = commands(parser)
    for c in cmds:
        out += [".PP", _synopsis(c)]
    out += [".PP", "\\fBtdbfs\\fR [\\fB\\-\\-version\\fR | \\fB\\-\\-help\\fR]",
            ".PP", "\\fBtdbfs \\fICOMMAND\\fR \\fB\\-\\-help\\fR",
            ".SH DESCRIPTION", _text(one_line(parser.description)),
            ".SH COMMANDS"]
    for c in cmds:
        out += _command(c)
    out += [".SH OPTIONS"]
    for o in top_options(parser):
        out += [".TP", ", ".join(_flag(f) for f in o.flags), _text(o.help)]
    if parser.epilog:
        out += [".SH EXAMPLES AND EXIT STATUS"] + _literal(parser.epilog)
    out += [".SH ENVIRONMENT"]
    for name, meaning in _ENVIRONMENT:
        out += [".TP", f"\\fB{_text(name)}\\fR", _text(meaning)]
    out += [".SH SEE ALSO", _text(_SEE_ALSO), ""]
    return "\n".join(out)


def main(argv=None) -> int:
    from .parser import build_parser
    sys.stdout.write(manpage(build_parser()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
