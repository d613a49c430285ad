# shellcheck shell=bash
# Shared setup for scripts/test and scripts/demo. Source it, then call
# `tdbfs_setup test` (scripts/test) or `tdbfs_setup demo` (scripts/demo). It is idempotent
# and quick on re-runs:
#   * Debian packages libfuse2 and fuse3 (apt-get, only when missing, only as root)
#   * /dev/fuse (mknod when absent, modprobe best-effort)
#   * a virtualenv at <project>/.venv with `pip install -e '.[test]'` (test) or
#     `pip install -e '.[demo]'` (demo: tdbfs and tiledb-py, which writes the demo's array),
#     redone only when pyproject.toml (or the Python interpreter) changed, or when the
#     tests need what a demo install left out;
#   * test only: Debian's chromium (picture tests), Azurite (Azure emulator tests), zsh (the
#     zsh completion test) and the genomicsdb wheel (TileDB 0.x tests).
# What apt-get and pip print goes to a log, shown only when they fail.
# After it: TDBFS_ROOT is the project root, TDBFS_PY the venv's python.

TDBFS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TDBFS_VENV="$TDBFS_ROOT/.venv"
TDBFS_PY="$TDBFS_VENV/bin/python"
export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INPUT=1

_tdbfs_log() { printf '[setup] %s\n' "$*" >&2; }

# Installers' output: appended to $TDBFS_SETUP_LOG (made by tdbfs_setup), printed by
# _tdbfs_show_log when an install fails, removed when the setup ends well.
_tdbfs_quiet() { "$@" </dev/null >>"${TDBFS_SETUP_LOG:-/dev/null}" 2>&1; }

_tdbfs_show_log() {
    TDBFS_SETUP_KEEP_LOG=1
    [ -s "${TDBFS_SETUP_LOG:-}" ] || return 0
    _tdbfs_log "what the installers printed ($TDBFS_SETUP_LOG):"
    cat "$TDBFS_SETUP_LOG" >&2
}

_tdbfs_is_root() { [ "$(id -u)" = 0 ]; }

_tdbfs_have_libfuse2() {
    # the shared library mfusepy loads through ctypes
    if command -v ldconfig >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2'; then
        return 0
    fi
    compgen -G '/usr/lib/*/libfuse.so.2*' >/dev/null || compgen -G '/lib/*/libfuse.so.2*' >/dev/null
}

_tdbfs_have_fuse3() {
    command -v fusermount3 >/dev/null 2>&1 || [ -x /usr/bin/fusermount3 ] || [ -x /bin/fusermount3 ]
}

# apt-get install, running `apt-get update` first only when the package lists are
# missing, or when the first attempt fails (stale lists).
_tdbfs_apt_install() {
    local lists_present=0
    if compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
        lists_present=1
    fi
    if [ "$lists_present" = 0 ]; then
        _tdbfs_log "apt-get update"
        _tdbfs_quiet apt-get update -qq || _tdbfs_log "warning: apt-get update failed"
    fi
    _tdbfs_log "apt-get install $*"
    if _tdbfs_quiet apt-get install -y -qq --no-install-recommends "$@"; then
        return 0
    fi
    if [ "$lists_present" = 1 ]; then
        _tdbfs_log "apt-get update (retry)"
        _tdbfs_quiet apt-get update -qq || true
        _tdbfs_quiet apt-get install -y -qq --no-install-recommends "$@" && return 0
    fi
    _tdbfs_show_log
    return 1
}

# Name of the libfuse 2 runtime package: libfuse2 (Debian 12) or libfuse2t64 (13+).
_tdbfs_libfuse2_pkg() {
    local cand
    cand="$(apt-cache policy libfuse2 2>/dev/null | awk '/Candidate:/ {print $2}')"
    if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
        echo libfuse2
        return
    fi
    cand="$(apt-cache policy libfuse2t64 2>/dev/null | awk '/Candidate:/ {print $2}')"
    if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
        echo libfuse2t64
        return
    fi
    echo libfuse2
}

_tdbfs_system_packages() {
    local want=()
    _tdbfs_have_libfuse2 || want+=(libfuse2)
    _tdbfs_have_fuse3 || want+=(fuse3)
    [ "${#want[@]}" = 0 ] && return 0
    if ! _tdbfs_is_root; then
        _tdbfs_log "warning: not root, cannot install ${want[*]} with apt-get; FUSE tests may fail"
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        _tdbfs_log "warning: no apt-get; please install ${want[*]} yourself"
        return 0
    fi
    if [ "${want[0]}" = libfuse2 ]; then
        if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
            _tdbfs_log "apt-get update"
            _tdbfs_quiet apt-get update -qq || _tdbfs_log "warning: apt-get update failed"
        fi
        want[0]="$(_tdbfs_libfuse2_pkg)"
    fi
    _tdbfs_apt_install "${want[@]}" || _tdbfs_log "warning: could not install ${want[*]}"
}

_tdbfs_dev_fuse() {
    if [ -e /dev/fuse ]; then
        return 0
    fi
    if command -v modprobe >/dev/null 2>&1; then
        modprobe fuse >/dev/null 2>&1 || true
    fi
    if [ ! -e /dev/fuse ]; then
        if _tdbfs_is_root; then
            _tdbfs_log "creating /dev/fuse"
            mknod /dev/fuse c 10 229 2>/dev/null && chmod 0666 /dev/fuse \
                || _tdbfs_log "warning: could not create /dev/fuse"
        else
            _tdbfs_log "warning: /dev/fuse is missing and we are not root"
        fi
    fi
}

# The venv for MODE (test or demo). A test install serves the demo too; a demo install is
# completed to a test install when scripts/test first runs.
_tdbfs_venv() {
    local mode="$1" base_py="${PYTHON:-python3}"
    if [ ! -x "$TDBFS_PY" ]; then
        _tdbfs_log "creating virtualenv $TDBFS_VENV"
        if ! _tdbfs_quiet "$base_py" -m venv "$TDBFS_VENV"; then
            # Debian's python3 ships venv/ensurepip separately
            rm -rf "$TDBFS_VENV"
            if _tdbfs_is_root && command -v apt-get >/dev/null 2>&1; then
                local ver
                ver="$("$base_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
                _tdbfs_apt_install python3-venv "python${ver}-venv" \
                    || _tdbfs_apt_install python3-venv || true
            fi
            _tdbfs_quiet "$base_py" -m venv "$TDBFS_VENV" \
                || { _tdbfs_show_log; _tdbfs_log "error: cannot create a virtualenv"; return 1; }
        fi
    fi
    # the stamp holds the hash of what the install depends on, then the mode installed
    local stamp_file="$TDBFS_VENV/.tdbfs-install-stamp" want have="" have_mode="" imports
    want="$( { cat "$TDBFS_ROOT/pyproject.toml"; "$TDBFS_PY" -c 'import sys; print(sys.version)'; } \
             | sha256sum | cut -d' ' -f1)"
    [ -f "$stamp_file" ] && read -r have have_mode <"$stamp_file"
    imports='import tdbfs, tiledb, mfusepy'
    [ "$mode" = test ] && imports="$imports, pytest"
    if [ "$want" = "$have" ] && { [ "$have_mode" = test ] || [ "$have_mode" = "$mode" ]; } \
            && "$TDBFS_PY" -c "$imports" >/dev/null 2>&1; then
        return 0
    fi
    _tdbfs_log "pip install -e '.[$mode]'"
    rm -f "$stamp_file"
    if ! (cd "$TDBFS_ROOT" && _tdbfs_quiet "$TDBFS_PY" -m pip install -e ".[$mode]"); then
        _tdbfs_show_log
        _tdbfs_log "error: pip install -e '.[$mode]' failed"
        return 1
    fi
    echo "$want $mode" >"$stamp_file"
}

# Debian's chromium: the picture tests render the SVG views to PNG with it, headless.
_tdbfs_chromium() {
    command -v chromium >/dev/null 2>&1 && return 0
    if ! _tdbfs_is_root; then
        _tdbfs_log "warning: not root, cannot install chromium with apt-get; the picture rendering tests will skip"
        return 0
    fi
    _tdbfs_apt_install chromium || _tdbfs_log "warning: apt-get install chromium failed"
}

# Azurite, the Azure Blob Storage emulator tests/test_gcs_azure.py runs (from npm, into the project's
# .npm/), with Debian's nodejs and npm when they are missing.
_tdbfs_azurite() {
    [ -x "$TDBFS_ROOT/.npm/node_modules/.bin/azurite-blob" ] && return 0
    if ! command -v npm >/dev/null 2>&1 && _tdbfs_is_root; then
        _tdbfs_apt_install nodejs npm || _tdbfs_log "warning: apt-get install nodejs npm failed"
    fi
    if ! command -v npm >/dev/null 2>&1; then
        _tdbfs_log "warning: no npm: the Azure emulator tests will skip"
        return 0
    fi
    _tdbfs_log "npm install --prefix .npm azurite"
    npm install --prefix "$TDBFS_ROOT/.npm" --no-audit --no-fund azurite@3 </dev/null >/dev/null 2>&1 \
        || _tdbfs_log "warning: npm install azurite failed: the Azure emulator tests will skip"
}

# zsh: tests/cli/test_completion.py checks the zsh completion script with it.
_tdbfs_zsh() {
    command -v zsh >/dev/null 2>&1 && return 0
    if ! _tdbfs_is_root || ! command -v apt-get >/dev/null 2>&1; then
        _tdbfs_log "warning: cannot install zsh; the zsh completion test will fail"
        return 0
    fi
    _tdbfs_apt_install zsh || _tdbfs_log "warning: apt-get install zsh failed"
}

# TileDB 0.x test arrays are written by the TileDB library inside this wheel (through ctypes, so --no-deps)
# (the wheel exists for CPython up to 3.12; elsewhere the 0.x library tests skip, saying why).
_tdbfs_genomicsdb() {
    "$TDBFS_PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("genomicsdb") is None)' 2>/dev/null \
        && return 0
    _tdbfs_quiet "$TDBFS_PY" -m pip install --no-deps genomicsdb==0.1.6 && return 0
    if "$TDBFS_PY" -c 'import sys; sys.exit(sys.version_info < (3, 13))'; then
        _tdbfs_log "warning: no genomicsdb wheel for this Python; the 0.x library tests will skip"
        return 0
    fi
    _tdbfs_show_log
    _tdbfs_log "error: pip install genomicsdb==0.1.6 failed"
    return 1
}

# tdbfs_setup test: everything scripts/test needs. tdbfs_setup demo: only what scripts/demo
# runs (FUSE, tdbfs, tiledb-py): no browser, emulator or test extra.
tdbfs_setup() {
    local mode="${1:-test}"
    case "$mode" in
        test|demo) ;;
        *) _tdbfs_log "error: tdbfs_setup test|demo, not '$mode'"; return 1 ;;
    esac
    TDBFS_SETUP_LOG="$(mktemp "${TMPDIR:-/tmp}/tdbfs-setup.XXXXXX")"
    TDBFS_SETUP_KEEP_LOG=0
    _tdbfs_system_packages
    if [ "$mode" = test ]; then
        _tdbfs_azurite
        _tdbfs_chromium
        _tdbfs_zsh
    fi
    _tdbfs_dev_fuse
    _tdbfs_venv "$mode" || return 1
    if [ "$mode" = test ]; then
        _tdbfs_genomicsdb || return 1
    fi
    # `man tdbfs` with .venv/bin on PATH (man looks in ../share/man of each PATH entry): pip puts
    # pyproject's data-files there in a regular install, not in an editable one
    mkdir -p "$TDBFS_VENV/share/man/man1"
    ln -sfn "$TDBFS_ROOT/docs/tdbfs.1" "$TDBFS_VENV/share/man/man1/tdbfs.1"
    # Byte-compile the package as a regular (non-editable) install does: every mount starts
    # a process that imports tdbfs, and compiling tdbfs's sources at each start costs ~0.1 s, which
    # would happen on every mount where PYTHONDONTWRITEBYTECODE is set.
    "$TDBFS_PY" -m compileall -q "$TDBFS_ROOT/tdbfs" >/dev/null || true
    if [ "$TDBFS_SETUP_KEEP_LOG" = 1 ]; then
        _tdbfs_log "installers' output kept in $TDBFS_SETUP_LOG"
    else
        rm -f "$TDBFS_SETUP_LOG"
    fi
}
