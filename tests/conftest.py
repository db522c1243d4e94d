"""Fixtures shared by the whole suite: a throwaway PostgreSQL cluster (tests/pg_cluster.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.pg_cluster import PgCluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL cluster for the test session, started when a test first asks for it."""
    with PgCluster() as cluster:
        yield cluster


@pytest.fixture
def pg_dsn(pg_cluster: PgCluster) -> Iterator[str]:
    """A DSN to a fresh, empty database of the session's cluster, dropped after the test."""
    name = f"test_{secrets.token_hex(6)}"
    dsn = pg_cluster.create_database(name)
    yield dsn
    pg_cluster.drop_database(name)
