"""A real broker on a PostgreSQL store over TLS, `sslmode=verify-full` against the tests'
cluster and its throwaway CA (issue 14, item 6): it serves, every connection it holds is TLS,
and `pager status` shows the URL with its sslmode but never the password. With a CA that did
not sign the server's certificate, it does not start, and says why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx2
import psycopg
import pytest

from tests.e2e.conftest import FAST_WINDOWS, Broker, postgres_env, start_broker
from tests.launch.conftest import PagerHome
from tests.pg_cluster import PgCluster


def verify_full_env(dsn: str, directory: Path, ca: Path) -> dict[str, str]:
    """postgres_env's PAGER_STORE and PGPASSFILE, the URL asking for verify-full with `ca`."""
    env = postgres_env(dsn, directory)
    # postgres_env's URL has no query: the TLS parameters are the only ones.
    env["PAGER_STORE"] += f"?sslmode=verify-full&sslrootcert={quote(str(ca))}"
    return env


@pytest.fixture
def tls_broker(tmp_path: Path, pg_dsn: str, pg_cluster: PgCluster) -> Iterator[Broker]:
    env = verify_full_env(pg_dsn, tmp_path, pg_cluster.ca_file)
    home = PagerHome(tmp_path / "home")
    yield start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **env)
    home.kill_all()


async def test_a_broker_runs_on_its_store_over_verify_full(
    tls_broker: Broker, pg_cluster: PgCluster, pg_dsn: str
) -> None:
    broker = tls_broker
    alice = await broker.register("alice")
    assert alice["token"]
    health = httpx2.get(broker.url + "/health", timeout=10).json()
    assert health["ok"] is True
    assert health["status"] == "ok", health

    # What the server says of the broker's connections (writer, listener, sweeps...): all TLS.
    with psycopg.connect(pg_dsn, connect_timeout=10) as admin:
        row = admin.execute(
            "SELECT count(*), bool_and(s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s"
            " USING (pid) WHERE a.datname = current_database()"
            " AND a.application_name LIKE 'pager%'"
        ).fetchone()
    assert row is not None
    count, all_tls = row
    assert count >= 1
    assert all_tls is True

    result = broker.home.run("status", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["store"]["kind"] == "postgresql"
    where = report["store"]["where"]
    assert where.startswith(broker.home.env["PAGER_STORE"] + " ")  # the URL, then the passfile
    assert "sslmode=verify-full" in where
    shown = result.stdout + broker.home.run("status").stdout
    logs = "".join(p.read_text(errors="replace") for p in broker.home.root.rglob("*.log"))
    assert pg_cluster.password not in shown + logs  # never shown, never logged (SPEC §13)


def test_a_broker_with_the_wrong_ca_does_not_start_and_says_why(
    tmp_path: Path, pg_dsn: str, pg_cluster: PgCluster
) -> None:
    home = PagerHome(tmp_path / "home")
    home.env.update(verify_full_env(pg_dsn, tmp_path, pg_cluster.other_ca_file))
    try:
        started = home.run("start", "--json")
        assert started.returncode != 0, started.stdout
        assert "certificate verify failed" in started.stderr
        assert home.env["PAGER_STORE"] in started.stderr  # which store, without a password
        logs = "".join(p.read_text(errors="replace") for p in home.root.rglob("*.log"))
        assert pg_cluster.password not in started.stdout + started.stderr + logs
    finally:
        home.kill_all()
