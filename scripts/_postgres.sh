# Used by scripts/test: the PostgreSQL server binaries that tests/pg_cluster.py runs its
# throwaway cluster with, and the `openssl` command that makes its TLS certificates. Quiet, and a
# no-op, when they are there; when they are missing, as root with apt-get (CI), installs Debian's
# `postgresql` and `openssl` packages; otherwise leaves the machine alone.
# Usage: ensure_postgres

# True when a directory holds initdb, pg_ctl and postgres (what tests/pg_cluster.py looks for:
# pg_config --bindir, then PATH, then /usr/lib/postgresql/<version>/bin).
postgres_binaries_found() {
    local dir
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir 2>/dev/null || true)"
        [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ] &&
            return 0
    fi
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 &&
        command -v postgres >/dev/null 2>&1 && return 0
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ] && return 0
    done
    return 1
}

ensure_postgres() {
    local log
    postgres_binaries_found && command -v openssl >/dev/null 2>&1 && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "pager: no PostgreSQL server binaries (initdb, pg_ctl, postgres) or no openssl; the" \
            "PostgreSQL tests will fail until they are installed (Debian: apt-get install" \
            "postgresql openssl)" >&2
        return 0
    fi
    echo "Installing Debian's postgresql and openssl packages for the PostgreSQL tests ..." >&2
    # The tests run their own throwaway cluster: have the package create (and start) none.
    mkdir -p /etc/postgresql-common/createcluster.d
    [ -e /etc/postgresql-common/createcluster.d/pager-tests.conf ] ||
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/pager-tests.conf
    log="$(mktemp)"
    # apt-get update only when the package lists don't know the package (fresh image) or are
    # stale (the install fails fetching).
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql openssl >"$log" 2>&1; then
        if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql openssl; } \
            >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            echo "pager: installing Debian's postgresql and openssl packages failed (output above)" >&2
            return 1
        fi
    fi
    rm -f "$log"
    if ! postgres_binaries_found; then
        echo "pager: installed Debian's postgresql package but found no initdb, pg_ctl and postgres" >&2
        return 1
    fi
}
