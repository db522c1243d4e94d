# Shared by scripts/pager and scripts/test: create or update .venv, quietly when up to date.
# Usage: ensure_venv EXTRAS   (EXTRAS: "" or "test")
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
# The checkout goes on the path as a plain line in a .pth file, not through setuptools'
# import finder: importing the finder (pathlib, re, importlib.util) cost every start of the
# venv's Python ~13 ms of CPU, half of a bare interpreter's start, `pager send` included.
EDITABLE_MODE="editable_mode=compat"

find_python() {
    local candidate
    for candidate in "${PAGER_BOOTSTRAP_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    echo "pager: Python 3.11 or newer is needed; install it or set PAGER_BOOTSTRAP_PYTHON" >&2
    return 1
}

# pip's account, one line per package it fetches and one when it installs them: a first run
# takes a minute or more and must not look stuck. The whole account is shown only on failure.
install_progress() {
    local line
    local -a packages
    while IFS= read -r line; do
        case "$line" in
            "Collecting "*)
                line="${line#Collecting }"
                printf '  fetching %s\n' "${line%% (from *}"
                ;;
            "Installing collected packages: "*)
                IFS=, read -ra packages <<<"${line#Installing collected packages: }"
                printf '  installing %d packages ...\n' "${#packages[@]}"
                ;;
            "Successfully installed "*)
                printf '  installed\n'
                ;;
        esac
    done
}

ensure_venv() {
    local extras="$1" spec="." stamp want log
    [ -n "$extras" ] && spec=".[$extras]"
    stamp="$VENV/.pager-install-stamp"
    # Reinstall when pyproject.toml, the way it is installed or the wanted extras change.
    want="$( (cat "$ROOT/pyproject.toml"; echo "$EDITABLE_MODE") | sha256sum | cut -c1-16) ${extras:-runtime}"
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && grep -qxF -- "$want" "$stamp"; then
        return 0
    fi
    # A test install includes the runtime one: don't downgrade the stamp for `pager`.
    if [ -z "$extras" ] && [ -f "$stamp" ] && grep -qxF -- "${want% *} test" "$stamp"; then
        return 0
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        echo "Creating $VENV ..." >&2
        "$(find_python)" -m venv "$VENV"
    fi
    echo "Installing Pager${extras:+ with [$extras]} into .venv (first run or pyproject.toml changed) ..." >&2
    log="$(mktemp)"
    if ! (cd "$ROOT" && "$VENV/bin/python" -m pip install --disable-pip-version-check \
        --progress-bar off --config-settings "$EDITABLE_MODE" -e "$spec") 2>&1 | tee "$log" | install_progress >&2; then
        cat "$log" >&2
        rm -f "$log"
        echo "pager: installing into .venv failed (output above)" >&2
        return 1
    fi
    rm -f "$log"
    echo "$want" >"$stamp"
}
