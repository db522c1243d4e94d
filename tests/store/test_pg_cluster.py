"""tests/pg_cluster.py, played for real with psycopg 3: the throwaway PostgreSQL cluster the
PostgreSQL store's tests run against."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import psycopg
import pytest

from tests.pg_cluster import PgCluster


def _uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem uids of a process (/proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(field) for field in line.split()[1:]]
    raise AssertionError(f"no Uid line for process {pid}")


def test_connects_with_the_dsn(pg_cluster: PgCluster) -> None:
    assert pg_cluster.dsn.startswith(f"postgresql://{pg_cluster.user}:")
    assert f"@127.0.0.1:{pg_cluster.port}/" in pg_cluster.dsn
    with psycopg.connect(pg_cluster.dsn, connect_timeout=10) as connection:
        row = connection.execute("SELECT version(), current_user").fetchone()
    assert row is not None
    assert row[0].startswith("PostgreSQL ")
    assert row[1] == pg_cluster.user


def test_password_is_checked_with_scram(pg_cluster: PgCluster) -> None:
    with psycopg.connect(pg_cluster.dsn, connect_timeout=10) as connection:
        assert connection.execute("SHOW password_encryption").fetchone() == ("scram-sha-256",)
        stored = connection.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = current_user"
        ).fetchone()
    assert stored is not None
    assert stored[0].startswith("SCRAM-SHA-256$")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host=pg_cluster.host,
            port=pg_cluster.port,
            user=pg_cluster.user,
            password=pg_cluster.password + "x",
            dbname="postgres",
            connect_timeout=10,
        )
    # Over the unix socket too: no trust, no peer authentication.
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host=str(pg_cluster.socket_dir),
            port=pg_cluster.port,
            user=pg_cluster.user,
            password="wrong",
            dbname="postgres",
            connect_timeout=10,
        )


def test_listens_on_loopback_only(pg_cluster: PgCluster) -> None:
    with psycopg.connect(pg_cluster.dsn, connect_timeout=10) as connection:
        assert connection.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        socket_dirs = connection.execute("SHOW unix_socket_directories").fetchone()
    assert socket_dirs == (str(pg_cluster.socket_dir),)
    # The port is bound to 127.0.0.1 alone: another loopback address (all of 127/8 reaches this
    # machine on Linux) is refused, and so is IPv6's loopback.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", pg_cluster.port), timeout=5).close()
    no_ipv6_or_refused = (
        "Connection refused|Cannot assign requested address|Address family not supported"
        "|Network is unreachable"
    )
    with pytest.raises(OSError, match=no_ipv6_or_refused):
        socket.create_connection(("::1", pg_cluster.port), timeout=5).close()
    # The unix socket lives in the cluster's own temporary directory, and works.
    with psycopg.connect(
        host=str(pg_cluster.socket_dir),
        port=pg_cluster.port,
        user=pg_cluster.user,
        password=pg_cluster.password,
        dbname="postgres",
        connect_timeout=10,
    ) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_each_pg_dsn_is_its_own_empty_database(pg_cluster: PgCluster, pg_dsn: str) -> None:
    other = pg_cluster.create_database("test_other_isolated")
    try:
        with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=10) as first:
            assert first.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone() == (0,)
            first.execute("CREATE TABLE mail (body text)")
            first.execute("INSERT INTO mail VALUES ('only here')")
            name = first.execute("SELECT current_database()").fetchone()
        with psycopg.connect(other, autocommit=True, connect_timeout=10) as second:
            assert second.execute("SELECT current_database()").fetchone() != name
            assert second.execute("SELECT to_regclass('public.mail')").fetchone() == (None,)
            second.execute("CREATE TABLE mail (body text)")  # no clash with the first's
            assert second.execute("SELECT count(*) FROM mail").fetchone() == (0,)
    finally:
        pg_cluster.drop_database("test_other_isolated")


def test_restart_drops_connections_and_serves_again(pg_cluster: PgCluster, pg_dsn: str) -> None:
    before = pg_cluster.pid
    with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=10) as connection:
        connection.execute("CREATE TABLE kept (n int)")
        connection.execute("INSERT INTO kept VALUES (1)")
        pg_cluster.restart()
        with pytest.raises(psycopg.OperationalError):
            connection.execute("SELECT 1")
        assert connection.closed
    assert pg_cluster.pid != before
    with psycopg.connect(pg_dsn, connect_timeout=10) as again:
        assert again.execute("SELECT n FROM kept").fetchall() == [(1,)]
    # A crash-like stop (immediate) recovers too.
    pg_cluster.restart(mode="immediate")
    with psycopg.connect(pg_dsn, connect_timeout=10) as again:
        assert again.execute("SELECT n FROM kept").fetchall() == [(1,)]


def test_server_runs_unprivileged(pg_cluster: PgCluster) -> None:
    uids = _uids(pg_cluster.pid)
    if os.geteuid() == 0:
        assert pg_cluster.run_as is not None
        assert uids == [pg_cluster.run_as.pw_uid] * 4
        assert 0 not in uids
        # Its files belong to that user, not to root.
        assert pg_cluster.data_dir.stat().st_uid == pg_cluster.run_as.pw_uid
    else:
        assert uids == [os.geteuid()] * 4


def test_a_cluster_is_removed_on_exit() -> None:
    with PgCluster() as cluster:
        root, pid = cluster.root, cluster.pid
        assert root is not None
        assert root.is_dir()
        with psycopg.connect(cluster.dsn, connect_timeout=10) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
    assert not root.exists()
    # pg_ctl stop waited for the server; its process is gone (or an unreaped zombie where
    # nothing reaps orphans, as under a container's pid 1).
    status = Path(f"/proc/{pid}/status")
    with contextlib.suppress(FileNotFoundError):
        assert "State:\tZ" in status.read_text()
