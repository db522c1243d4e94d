"""Fixtures shared by the whole suite: a throwaway PostgreSQL cluster (tests/pg_cluster.py).

scripts/test runs the suite in pytest-xdist workers (`--dist loadgroup`), which deal tests out
one by one: a module whose module-scoped fixture is costly, or makes something of the machine's
own (network namespaces), marks its tests `pytest.mark.xdist_group(NAME)` so that they share one
worker and the fixture is made once. A session fixture is made once per worker."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.other_user import throwaway_user
from tests.pg_cluster import PgCluster


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers this marker itself; this keeps `-p no:xdist` working with
    # --strict-markers (the groups then mean nothing).
    config.addinivalue_line(
        "markers", "xdist_group(name): tests that pytest-xdist runs on one worker (loadgroup)"
    )


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL cluster for the test session, started when a test first asks for it.
    Under pytest-xdist, one per worker: tests stop, restart and reconfigure it (test_pg_faults,
    test_pg_cluster, test_pg_tls), which another worker's tests must not see."""
    with PgCluster() as cluster:
        yield cluster


@pytest.fixture
def pg_dsn(pg_cluster: PgCluster) -> Iterator[str]:
    """A DSN to a fresh, empty database of the session's cluster, dropped after the test."""
    name = f"test_{secrets.token_hex(6)}"
    dsn = pg_cluster.create_database(name)
    yield dsn
    pg_cluster.drop_database(name)


@pytest.fixture
def other_user() -> Iterator[str]:
    """A throwaway Unix account to play another local user (tests/other_user.py); the test is
    skipped, saying why, where one cannot be made."""
    with throwaway_user() as name:
        yield name
