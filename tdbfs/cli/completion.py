"""`tdbfs completion bash|zsh`: a shell completion script made from the command line parser, so a
new command or option completes without anyone editing a script.

What a value completes to follows from its metavar: ARRAY, MNT, DIR, SRC and DEST a folder, FILE and ADDRESS (a
scheduler file) a file, PATH a path in the tree of the ARRAY given before it (listed with
`tdbfs ls`, for a local array only: a Tab must not wait on the network), OUT (tdbfs export's) a file,
an argument with choices its choices, and `-o` the options below, after the last comma."""

from __future__ import annotations

from .parser_info import Command, Option, Positional, commands, one_line, top_options

#: `tdbfs mount -o` options tdbfs itself reads (fuse_setup.FuseOptions, cli/mount.py) and the libfuse
#: options its help names; a trailing '=' takes a value.
MOUNT_OPTIONS = ("threads", "max_threads=", "allow_other", "attr_timeout=", "entry_timeout=",
                 "negative_timeout=", "fsname=", "read_ahead_kb=", "check=", "debug")

#: backend options of a URL (cli/remote_options.py), for every command that reads an array.
BACKEND_OPTIONS = ("timeout=", "s3.endpoint_url=", "s3.anon=", "s3.client_kwargs.region_name=",
                   "gcs.token=", "az.account_name=")

_FOLDERS = {"ARRAY", "MNT", "DIR"}
_FOLDERS |= {"SRC", "DEST"}   # tdbfs salvage: the array read, the new array written
_FILES = {"FILE", "ADDRESS", "OUT"}   # OUT: tdbfs export's output file


def option_words(command: str) -> tuple[str, ...]:
    return (MOUNT_OPTIONS if command == "mount" else ()) + BACKEND_OPTIONS


def _kind(metavar: str | None, choices: tuple[str, ...]) -> str:
    """How a value completes: choices, folders, files, tree (a path in the view), options, or none."""
    if choices:
        return "choices"
    if metavar in _FOLDERS:
        return "folders"
    if metavar in _FILES:
        return "files"
    if metavar == "PATH":
        return "tree"
    if metavar and metavar.startswith("OPT"):
        return "options"
    return "none"


def script(shell: str, parser) -> str:
    if shell == "bash":
        return bash_script(parser)
    if shell == "zsh":
        return zsh_script(parser)
    raise ValueError(f"no completion for {shell!r}: bash or zsh")


# --------------------------------------------------------------------------- bash

_BASH_HELPERS = r'''
# PATH of ls, cat and tree: the entries of the view of the local ARRAY given before it
_tdbfs_tree_path() {
    local array="$1" dir="" IFS=$'\n'
    case "$array" in *://*|'') return ;; esac
    [[ "$cur" == */* ]] && dir="${cur%/*}/"
    COMPREPLY=($(compgen -P "$dir" -W "$("${COMP_WORDS[0]}" ls "$array" "$dir" 2>/dev/null)" -- "${cur##*/}"))
    compopt -o nospace 2>/dev/null
}

# -o: the options of the command, after the last comma
_tdbfs_options() {
    local head="" IFS=$' \t\n'
    [[ "$cur" == *,* ]] && head="${cur%,*},"
    COMPREPLY=($(compgen -P "$head" -W "$1" -- "${cur##*,}"))
    compopt -o nospace 2>/dev/null
}
'''


def _bash_value(kind: str, words: str, array_var: str = "$array") -> str:
    if kind == "choices":
        return f'COMPREPLY=($(compgen -W "{words}" -- "$cur"))'
    if kind == "folders":
        return 'COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null'
    if kind == "files":
        return 'COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null'
    if kind == "tree":
        return f'_tdbfs_tree_path "{array_var}"'
    if kind == "options":
        return f'_tdbfs_options "{words}"'
    return ":"


def _bash_command(cmd: Command) -> str:
    names = "|".join((cmd.name,) + cmd.aliases)
    flags = " ".join(f for o in cmd.options for f in o.flags)
    valued = [o for o in cmd.options if o.metavar]
    lines = [f"        {names})"]
    if valued:
        lines.append('            case "$prev" in')
        for o in valued:
            words = " ".join(o.choices or option_words(cmd.name))
            lines.append(f'                {"|".join(o.flags)}) {_bash_value(_kind(o.metavar, o.choices), words)}; return ;;')
        lines.append("            esac")
    lines.append(f'            if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{flags}" -- "$cur")); return; fi')
    valued_flags = " ".join(f for o in valued for f in o.flags)
    # the positionals before the word being completed (option values skipped), and the first of them
    lines += [
        "            local n=0 skip=0 array=''",
        "            for ((i = start + 1; i < COMP_CWORD; i++)); do",
        "                local w=\"${COMP_WORDS[i]}\"",
        "                if ((skip)); then skip=0; continue; fi",
        f'                case " {valued_flags} " in *" $w "*) skip=1; continue ;; esac',
        '                [[ "$w" == -* ]] && continue',
        '                ((n == 0)) && array="$w"',
        "                ((n++))",
        "            done",
        '            case "$n" in',
    ]
    for i, pos in enumerate(cmd.positionals):
        lines.append(f'                {i}) {_bash_value(_kind(pos.metavar, pos.choices), " ".join(pos.choices))} ;;')
    lines += ["            esac", "            ;;"]
    return "\n".join(lines)


def bash_script(parser) -> str:
    cmds = commands(parser)
    names = " ".join(n for c in cmds for n in (c.name,) + c.aliases)
    top = " ".join(f for o in top_options(parser) for f in o.flags)
    body = "\n".join(_bash_command(c) for c in cmds)
    return f'''# bash completion for tdbfs, made from its command line by `tdbfs completion bash`.
# Load it with:  source <(tdbfs completion bash)
# or for good:   tdbfs completion bash > ~/.local/share/bash-completion/completions/tdbfs
{_BASH_HELPERS}
_tdbfs() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" cmd="" start=0 i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            -*) ;;
            *) cmd="${{COMP_WORDS[i]}}"; start=$i; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W "{top}" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "{names}" -- "$cur"))
        fi
        return
    fi
    case "$cmd" in
{body}
    esac
}}
complete -F _tdbfs tdbfs
'''


# --------------------------------------------------------------------------- zsh

def _quoted(text: str) -> str:
    """Text to go between single quotes in the script."""
    return text.replace("'", "'\\''")


def _short(text: str, limit: int = 70) -> str:
    text = one_line(text)
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def _zsh_text(text: str) -> str:
    """A description or message in a zsh _arguments spec: short, one line, with the characters that
    would end its part early ([, ], :) escaped."""
    text = _short(text)
    for char in "\\[]:":   # the backslash first, so the ones added are not doubled
        text = text.replace(char, "\\" + char)
    return _quoted(text)


def _zsh_action(kind: str, words: tuple[str, ...], command: str) -> str:
    if kind == "choices":
        return "(" + " ".join(words) + ")"
    if kind == "folders":
        return "_files -/"
    if kind == "files":
        return "_files"
    if kind == "tree":
        return "->tree"
    if kind == "options":
        return f"_tdbfs_options_{command}"
    return " "


def _zsh_option(o: Option, command: str) -> list[str]:
    help_text = _zsh_text(o.help)
    value = ""
    if o.metavar:
        action = _zsh_action(_kind(o.metavar, o.choices), o.choices, command)
        value = f":{_zsh_text(o.metavar)}:{action}"
    star = "*" if o.repeatable else ""
    if len(o.flags) == 1:
        return [f"'{star}{o.flags[0]}[{help_text}]{value}'"]
    exclusive = "(" + " ".join(o.flags) + ")"
    return [f"'{exclusive}'{{{','.join(o.flags)}}}'[{help_text}]{value}'"]


def _zsh_positional(p: Positional, command: str) -> str:
    optional = ":" if p.optional else ""
    return f"'{optional}:{p.metavar}:{_zsh_action(_kind(p.metavar, p.choices), p.choices, command)}'"


def zsh_script(parser) -> str:
    cmds = commands(parser)
    described = " ".join(f"'{n}:{_quoted(_short(c.help))}'" for c in cmds for n in (c.name,) + c.aliases)
    option_functions = []
    cases = []
    for c in cmds:
        specs = [s for o in c.options for s in _zsh_option(o, c.name)]
        specs += [_zsh_positional(p, c.name) for p in c.positionals]
        if any(o.metavar and o.metavar.startswith("OPT") for o in c.options):
            # _values specs: NAME, or NAME:MESSAGE:ACTION for an option that takes a value
            words = " ".join(f"'{w[:-1]}:value: '" if w.endswith("=") else f"'{w}'" for w in option_words(c.name))
            option_functions.append(f"_tdbfs_options_{c.name}() {{ _values -s , 'option' {words} }}")
        joined = " \\\n                ".join(specs)
        cases.append(f"        {'|'.join((c.name,) + c.aliases)})\n"
                     f"            _arguments -C \\\n                {joined} && ret=0\n            ;;")
    top = " ".join(s for o in top_options(parser) for s in _zsh_option(o, ""))
    nl = "\n"
    return f'''#compdef tdbfs
# zsh completion for tdbfs, made from its command line by `tdbfs completion zsh`.
# Load it with:  source <(tdbfs completion zsh)   (after compinit)
# or for good:   tdbfs completion zsh > "${{fpath[1]}}/_tdbfs"

{nl.join(option_functions)}

# PATH of ls, cat and tree: the entries of the view of the local ARRAY given before it
_tdbfs_tree_path() {{
    local array="$1" dir=""
    [[ -z "$array" || "$array" == *://* ]] && return 1
    [[ "$PREFIX" == */* ]] && dir="${{PREFIX%/*}}/"
    local -a entries
    entries=(${{(f)"$(tdbfs ls "$array" "$dir" 2>/dev/null)"}})
    compset -P '*/'
    compadd -S '' -- "${{entries[@]}}"
}}

_tdbfs() {{
    local curcontext="$curcontext" state state_descr line ret=1
    typeset -A opt_args
    _arguments -C {top} \\
        '1:command:->command' \\
        '*::argument:->argument' && ret=0
    case "$state" in
        command)
            local -a commands
            commands=({described})
            _describe -t commands 'tdbfs command' commands && ret=0
            return ret
            ;;
    esac
    curcontext="${{curcontext%:*:*}}:tdbfs-$words[1]:"
    state=""
    case "$words[1]" in
{nl.join(cases)}
    esac
    if [[ "$state" == tree ]]; then
        _tdbfs_tree_path "$line[1]" && ret=0
    fi
    return ret
}}

if [[ "$funcstack[1]" == _tdbfs ]]; then
    _tdbfs "$@"
else
    compdef _tdbfs tdbfs
fi
'''

