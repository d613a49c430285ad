"""docs/tdbfs.1 is what tdbfs/cli/manpage.py makes from the parser now (run scripts/manpage after a
change to the command line), and it holds every command and option --help shows."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from tdbfs import __version__
from tdbfs.cli.manpage import manpage
from tdbfs.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "docs" / "tdbfs.1"


def test_the_committed_man_page_is_what_the_parser_makes_now():
    made = manpage(build_parser())
    assert MAN.read_text(encoding="utf-8") == made, "docs/tdbfs.1 is stale: run scripts/manpage"
    res = subprocess.run([sys.executable, "-m", "tdbfs.cli.manpage"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert res.returncode == 0 and res.stderr == "" and res.stdout == made


def test_it_names_every_command_and_every_option_help_shows():
    text = MAN.read_text(encoding="utf-8")
    assert f'.TH TDBFS 1 "" "tdbfs {__version__}" "User Commands"' in text
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = text.split("\n.SH COMMANDS\n", 1)[1].split("\n.SH ", 1)[0]
    sections = {part.split("\n", 1)[0].split(" ")[0]: part for part in commands.split(".SS ")[1:]}
    assert set(sections) == {"mount", "umount", "ls", "cat", "tree", "check", "completion",
                             "export", "salvage"}
    assert sections["umount"].startswith("umount (alias: unmount)")
    for name, subparser in sub.choices.items():
        section = sections["umount" if name == "unmount" else name]
        for action in subparser._actions:
            for flag in action.option_strings:
                shown = "\\fB" + flag.replace("-", "\\-") + "\\fR"
                if action.help == argparse.SUPPRESS:
                    assert shown not in section, (name, flag)  # hidden from --help, hidden here
                elif flag not in ("-h", "--help"):
                    assert f".TP\n{shown}" in section or f", {shown}" in section, (name, flag)
    assert "\\fBtdbfs mount\\fR [\\fB\\-f\\fR | \\fB\\-\\-foreground\\fR]" in text
    assert "tdbfs check \\-\\-json /data/my_array | jq .problems" in text  # an epilog's example, kept as written


def test_every_line_is_text_or_a_known_request():
    # a text line starting with '.' or "'" would be read as a roff request; the generator escapes them
    requests = {".TH", ".SH", ".SS", ".PP", ".TP", ".nf", ".fi", '.\\"'}
    for line in MAN.read_text(encoding="utf-8").splitlines():
        if line[:1] in (".", "'"):
            assert line.split(" ")[0] in requests, line
