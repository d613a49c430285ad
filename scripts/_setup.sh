# shellcheck shell=bash
# Shared setup for scripts/test and scripts/demo. Source it, then call
# `tdbfs_setup`. It is idempotent and quick on re-runs:
#   * Debian packages libfuse2 and fuse3 (apt-get, only when missing, only as root)
#   * /dev/fuse (mknod when absent, modprobe best-effort)
#   * a virtualenv at <project>/.venv with `pip install -e '.[test]'`, redone only
#     when pyproject.toml (or the Python interpreter) changed.
# After it: TDBFS_ROOT is the project root, TDBFS_PY the venv's python.

TDBFS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TDBFS_VENV="$TDBFS_ROOT/.venv"
TDBFS_PY="$TDBFS_VENV/bin/python"
export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_NO_INPUT=1

_tdbfs_log() { printf '[setup] %s\n' "$*" >&2; }

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
        apt-get update -qq </dev/null >/dev/null || _tdbfs_log "warning: apt-get update failed"
    fi
    _tdbfs_log "apt-get install $*"
    if apt-get install -y -qq --no-install-recommends "$@" </dev/null >/dev/null; then
        return 0
    fi
    if [ "$lists_present" = 1 ]; then
        _tdbfs_log "apt-get update (retry)"
        apt-get update -qq </dev/null >/dev/null || true
        apt-get install -y -qq --no-install-recommends "$@" </dev/null >/dev/null && return 0
    fi
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
            apt-get update -qq </dev/null >/dev/null || _tdbfs_log "warning: apt-get update failed"
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

_tdbfs_venv() {
    local base_py="${PYTHON:-python3}"
    if [ ! -x "$TDBFS_PY" ]; then
        _tdbfs_log "creating virtualenv $TDBFS_VENV"
        if ! "$base_py" -m venv "$TDBFS_VENV" >/dev/null 2>&1; then
            # Debian's python3 ships venv/ensurepip separately
            rm -rf "$TDBFS_VENV"
            if _tdbfs_is_root && command -v apt-get >/dev/null 2>&1; then
                local ver
                ver="$("$base_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
                _tdbfs_apt_install python3-venv "python${ver}-venv" \
                    || _tdbfs_apt_install python3-venv || true
            fi
            "$base_py" -m venv "$TDBFS_VENV" || { _tdbfs_log "error: cannot create a virtualenv"; return 1; }
        fi
    fi
    local stamp_file="$TDBFS_VENV/.tdbfs-install-stamp" want have=""
    want="$( { cat "$TDBFS_ROOT/pyproject.toml"; "$TDBFS_PY" -c 'import sys; print(sys.version)'; } \
             | sha256sum | cut -d' ' -f1)"
    [ -f "$stamp_file" ] && have="$(cat "$stamp_file")"
    if [ "$want" = "$have" ] && "$TDBFS_PY" -c 'import tdbfs, tiledb, pytest, mfusepy' >/dev/null 2>&1; then
        return 0
    fi
    _tdbfs_log "pip install -e '.[test]'"
    rm -f "$stamp_file"
    (cd "$TDBFS_ROOT" && "$TDBFS_PY" -m pip install -q -e '.[test]' </dev/null) \
        || { _tdbfs_log "error: pip install failed"; return 1; }
    echo "$want" >"$stamp_file"
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

tdbfs_setup() {
    _tdbfs_system_packages
    _tdbfs_azurite
    _tdbfs_chromium
    _tdbfs_dev_fuse
    _tdbfs_venv
    # TileDB 0.x test arrays are written by the TileDB library inside this wheel (through ctypes, so --no-deps)
    # (the wheel exists for CPython up to 3.12; elsewhere the 0.x library tests skip, saying why).
    "$TDBFS_PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("genomicsdb") is None)' 2>/dev/null \
        || "$TDBFS_PY" -m pip install -q --no-deps genomicsdb==0.1.6 </dev/null \
        || if "$TDBFS_PY" -c 'import sys; sys.exit(sys.version_info < (3, 13))'; then
               _tdbfs_log "warning: no genomicsdb wheel for this Python; the 0.x library tests will skip"
           else
               _tdbfs_log "error: pip install genomicsdb==0.1.6 failed"; return 1
           fi
    # Byte-compile the package as a regular (non-editable) install does: every mount starts
    # a process that imports tdbfs, and compiling tdbfs's sources at each start costs ~0.1 s, which
    # would happen on every mount where PYTHONDONTWRITEBYTECODE is set.
    "$TDBFS_PY" -m compileall -q "$TDBFS_ROOT/tdbfs" >/dev/null || true
}
