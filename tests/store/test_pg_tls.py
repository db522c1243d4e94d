"""TLS to the PostgreSQL store (issue 14, item 6), on the tests' own cluster, which serves TLS
with a certificate signed by a throwaway CA (tests/pg_cluster.py): `verify-full` with that CA
connects over TLS, with another CA it is refused without the password in the message; a role
the server accepts over TLS only is refused with `sslmode=disable` and over the unix socket, and
served with `require`; plain TCP still serves the other roles.
Every connection goes through the broker's own `connect` and a URL checked by `parse_store`."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import psycopg
import psycopg.sql
import pytest

from pager.config import StoreConfig, parse_store
from pager.store.pg._database import PgUnreachable, connect
from tests.pg_cluster import PgCluster


def tls_store(
    dsn: str, directory: Path, query: str, *, user: str = "", password: str = "", host: str = ""
) -> StoreConfig:
    """The StoreConfig config.toml would give for `dsn`'s database with `query` added (as
    `user`/`password` when given, else the DSN's), the password in a mode-600 file."""
    parts = urlsplit(dsn)
    user = user or unquote(parts.username or "")
    secret = password or unquote(parts.password or "")
    file = directory / f"store-password-{secrets.token_hex(4)}"
    file.write_text(secret + "\n")
    file.chmod(0o600)
    url = f"postgresql://{quote(user, safe='')}@{host or parts.hostname}:{parts.port}{parts.path}"
    return parse_store(f"{url}?{query}", source="test", password_file=file)


def verify_full(ca: Path) -> str:
    return f"sslmode=verify-full&sslrootcert={quote(str(ca), safe='/')}"


def tls_in_use(conn: psycopg.Connection[Any]) -> bool:
    """What the server says of this connection (not what the client asked for)."""
    row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    assert row is not None
    return bool(row[0])


@pytest.fixture(scope="module")
def tls_role(pg_cluster: PgCluster) -> tuple[str, str]:
    """A role (name, password) the cluster serves over TLS only; one per module: the cluster
    is the session's, and roles are the cluster's, not a database's."""
    name, password = f"tls_only_{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    pg_cluster.create_tls_only_role(name, password)
    return name, password


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_verify_full_with_the_clusters_ca_connects_over_tls(
    pg_cluster: PgCluster, pg_dsn: str, tmp_path: Path, host: str
) -> None:
    """The server's certificate names both IP:127.0.0.1 and DNS:localhost."""
    store = tls_store(pg_dsn, tmp_path, verify_full(pg_cluster.ca_file), host=host)
    conn = connect(store)
    try:
        assert tls_in_use(conn)
        assert conn.info.host == host
    finally:
        conn.close()


def test_verify_full_with_another_ca_is_refused_without_the_password(
    pg_cluster: PgCluster, pg_dsn: str, tmp_path: Path
) -> None:
    store = tls_store(pg_dsn, tmp_path, verify_full(pg_cluster.other_ca_file))
    with pytest.raises(PgUnreachable) as refused:
        connect(store)
    message = str(refused.value)
    assert "certificate verify failed" in refused.value.detail, message
    assert refused.value.where == store.url
    assert store.url is not None
    assert store.url in message  # the store is named, and what to check: the sslmode among it
    assert "sslmode" in message.removeprefix(store.url)
    assert pg_cluster.password not in message + repr(refused.value)


def test_plain_tcp_is_still_served(pg_cluster: PgCluster, pg_dsn: str, tmp_path: Path) -> None:
    """TLS is offered, not required: the other tests' connections work as before."""
    conn = connect(tls_store(pg_dsn, tmp_path, "sslmode=disable"))
    try:
        assert not tls_in_use(conn)
    finally:
        conn.close()


def test_sslmode_disable_is_refused_for_a_tls_only_role(
    pg_dsn: str, tmp_path: Path, tls_role: tuple[str, str]
) -> None:
    name, password = tls_role
    store = tls_store(pg_dsn, tmp_path, "sslmode=disable", user=name, password=password)
    with pytest.raises(PgUnreachable) as refused:
        connect(store)
    # The server's refusal (pg_hba.conf's hostnossl line), not a wrong password.
    assert "pg_hba.conf rejects connection" in refused.value.detail, refused.value
    assert "no encryption" in refused.value.detail, refused.value
    assert password not in str(refused.value)


def test_sslmode_require_serves_a_tls_only_role(
    pg_dsn: str, tmp_path: Path, tls_role: tuple[str, str]
) -> None:
    name, password = tls_role
    conn = connect(tls_store(pg_dsn, tmp_path, "sslmode=require", user=name, password=password))
    try:
        assert tls_in_use(conn)
        assert conn.execute("SELECT current_user").fetchone() == (name,)
    finally:
        conn.close()


def test_verify_full_serves_a_tls_only_role(
    pg_cluster: PgCluster, pg_dsn: str, tmp_path: Path, tls_role: tuple[str, str]
) -> None:
    name, password = tls_role
    store = tls_store(
        pg_dsn, tmp_path, verify_full(pg_cluster.ca_file), user=name, password=password
    )
    conn = connect(store)
    try:
        assert tls_in_use(conn)
    finally:
        conn.close()


def test_the_unix_socket_is_refused_for_a_tls_only_role(
    pg_cluster: PgCluster, pg_dsn: str, tmp_path: Path, tls_role: tuple[str, str]
) -> None:
    """No TLS over a unix socket: a TLS-only role has no way in there either."""
    name, password = tls_role
    file = tmp_path / "store-password"
    file.write_text(password + "\n")
    file.chmod(0o600)
    database = urlsplit(pg_dsn).path
    url = f"postgresql://{name}@:{pg_cluster.port}{database}?host={pg_cluster.socket_dir}"
    with pytest.raises(PgUnreachable) as refused:
        connect(parse_store(url, source="test", password_file=file))
    assert "pg_hba.conf rejects connection" in refused.value.detail, refused.value


def test_a_server_asking_for_the_password_in_the_clear_is_refused(
    pg_cluster: PgCluster, pg_dsn: str, tmp_path: Path
) -> None:
    """SCRAM only (SPEC §13): a server, or an impostor, that asks for the password in the
    clear gets nothing; Pager refuses before sending it (libpq's require_auth)."""
    name, password = f"plain_{secrets.token_hex(4)}", "s3cret-plain"
    with psycopg.connect(pg_cluster.dsn, autocommit=True, connect_timeout=10) as admin:
        admin.execute(
            psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                psycopg.sql.Identifier(name), psycopg.sql.Literal(password)
            )
        )
    hba = pg_cluster.data_dir / "pg_hba.conf"
    hba.write_text(f"host all {name} all password\n" + hba.read_text())  # owner kept
    pg_cluster.reload()
    store = tls_store(pg_dsn, tmp_path, "sslmode=disable", user=name, password=password)
    with pytest.raises(PgUnreachable) as refused:
        connect(store)
    assert password not in str(refused.value)
    assert "authentication method requirement" in refused.value.detail, refused.value
