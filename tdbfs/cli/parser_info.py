"""The command line as data, read from the argparse parser, for what is generated from it: the shell
completion scripts (`completion.py`) and the man page (`manpage.py`). Options hidden from --help
are left out; nothing here changes the parser."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]          # ("-o",), ("-f", "--foreground")
    metavar: str | None             # None: a flag that takes no value
    help: str
    choices: tuple[str, ...] = ()
    repeatable: bool = False        # -o (action="append")


@dataclass(frozen=True)
class Positional:
    metavar: str                    # ARRAY, MNT, PATH, SHELL
    help: str
    optional: bool
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    name: str
    aliases: tuple[str, ...]
    help: str
    description: str
    epilog: str
    options: tuple[Option, ...]
    positionals: tuple[Positional, ...]


def one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper()


def _arguments(parser: argparse.ArgumentParser):
    options, positionals = [], []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        choices = tuple(map(str, action.choices or ()))
        if action.option_strings:
            takes_value = action.nargs != 0
            options.append(Option(tuple(action.option_strings), _metavar(action) if takes_value else None,
                                  one_line(action.help), choices, isinstance(action, argparse._AppendAction)))
        else:
            positionals.append(Positional(_metavar(action), one_line(action.help), action.nargs == "?", choices))
    return tuple(options), tuple(positionals)


def top_options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    return _arguments(parser)[0]


def commands(parser: argparse.ArgumentParser) -> tuple[Command, ...]:
    """Every subcommand in the parser's order, each once, with its aliases."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: one_line(choice.help) for choice in sub._choices_actions}
    names: dict[int, list[str]] = {}
    parsers = {}
    for name, subparser in sub.choices.items():
        names.setdefault(id(subparser), []).append(name)
        parsers[id(subparser)] = subparser
    out = []
    for key, (name, *aliases) in names.items():
        subparser = parsers[key]
        options, positionals = _arguments(subparser)
        out.append(Command(name, tuple(aliases), helps.get(name, ""), subparser.description or "",
                           subparser.epilog or "", options, positionals))
    return tuple(out)
