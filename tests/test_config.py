"""Configuration parsing: durations, schedules, sizes, precedence and clear refusals."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pager.config import (
    Config,
    ConfigError,
    StoreConfig,
    default_host_name,
    load_config,
    parse_duration,
    parse_schedule,
    parse_size,
    remote_warning,
)
from pager.domain.delivery import ClaimPolicy
from pager.domain.limits import SendLimits
from pager.domain.windows import Windows


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("15m", 900.0),
        ("2h", 7200.0),
        ("7d", 604800.0),
        ("1.5s", 1.5),
        (" 2h ", 7200.0),
    ],
)
def test_parse_duration_units(text: str, seconds: float) -> None:
    """Every unit of SPEC §3 parses to seconds."""
    assert parse_duration(text, source="x") == seconds


@pytest.mark.parametrize("text", ["", "5", "5 minutes", "-1s", "0s", "1e3s", "s", "nan", "1y"])
def test_parse_duration_rejects_malformed(text: str) -> None:
    """Malformed durations name the source and show the accepted form."""
    with pytest.raises(ConfigError, match=r"SRC: .*e\.g\. 500ms"):
        parse_duration(text, source="SRC")


def test_parse_schedule_last_delay_repeats() -> None:
    """A schedule's last delay repeats for every later attempt."""
    windows = Windows(redelivery=parse_schedule("1s, 2s", source="x"))
    assert [windows.redelivery_schedule.delay(n) for n in (1, 2, 3, 10)] == [1.0, 2.0, 2.0, 2.0]
    assert parse_schedule("300ms", source="x") == (0.3,)


@pytest.mark.parametrize("text", ["", "1s,", ",1s", "1s,,2s", "1s, soon"])
def test_parse_schedule_rejects_malformed(text: str) -> None:
    """Empty entries and bad durations in a schedule are refused."""
    with pytest.raises(ConfigError):
        parse_schedule(text, source="x")


def test_parse_size_units() -> None:
    """Sizes take bytes, KiB or MiB; nonsense is refused."""
    assert parse_size("32KiB", source="x") == 32768
    assert parse_size(4096, source="x") == 4096
    assert parse_size("1MiB", source="x") == 1048576
    for bad in ("0", "1GB", "-1", "lots", True):
        with pytest.raises(ConfigError):
            parse_size(bad, source="x")


def test_load_config_defaults_without_file(tmp_path: Path) -> None:
    """No file, no environment: SPEC §9 defaults."""
    config = load_config(tmp_path / "config.toml", environ={})
    assert config.host == "127.0.0.1"
    assert config.port is None
    assert config.windows.ack_wait == 60.0
    assert config.windows.redelivery == (2.0, 10.0, 30.0, 120.0, 600.0, 1800.0)
    assert config.limits.request_cap == 1024 * 1024


def test_load_config_precedence_flag_env_file(tmp_path: Path) -> None:
    """Flag beats environment beats config.toml beats default."""
    path = tmp_path / "config.toml"
    path.write_text(
        'port = 1111\nhost = "127.0.0.2"\n[windows]\nack_wait = "1m"\nlease_ttl = "5s"\n'
    )
    env = {"PAGER_PORT": "2222", "PAGER_WINDOW_ACK_WAIT": "2m"}
    config = load_config(path, environ=env, port=3333)
    assert config.port == 3333
    assert config.host == "127.0.0.2"
    assert config.windows.ack_wait == 120.0
    assert config.windows.lease_ttl == 5.0
    assert load_config(path, environ=env).port == 2222
    assert load_config(path, environ={}).port == 1111


def test_load_config_redelivery_as_toml_list(tmp_path: Path) -> None:
    """The schedule may be a TOML list as well as a comma-separated string."""
    path = tmp_path / "config.toml"
    path.write_text('[windows]\nredelivery = ["1s", "3s"]\nmax_attempts = 3\n')
    config = load_config(path, environ={})
    assert config.windows.redelivery == (1.0, 3.0)
    assert config.windows.max_attempts == 3


def test_the_send_limits_are_read_into_their_one_definition(tmp_path: Path) -> None:
    """`[limits]` and PAGER_LIMIT_* name the send limits by the keywords `SendLimits` is built
    with: what the guard checks is what the person wrote, with no copy in between."""
    path = tmp_path / "config.toml"
    path.write_text("[limits]\nmax_hops = 0\ntoken_sends_per_hour = 7\nbody_cap = '8KiB'\n")
    config = load_config(path, environ={"PAGER_LIMIT_PAIR_SENDS_PER_HOUR": "2"})
    assert config.limits.send == SendLimits(
        max_hops=0, token_sends_per_hour=7, pair_sends_per_hour=2
    )
    assert (config.limits.send.script_per_hour, config.limits.send.pair_per_hour) == (7, 2)
    assert config.limits.body_cap == 8 * 1024
    assert load_config(tmp_path / "none.toml", environ={}).limits.send == SendLimits()


def test_the_claim_policy_is_the_windows_own() -> None:
    windows = Windows(ack_wait=5.0, max_attempts=2, message_expiry=60.0, redelivery=(1.0, 3.0))
    assert windows.claim_policy == ClaimPolicy(
        ack_wait=5.0,
        max_attempts=2,
        message_expiry=60.0,
        redelivery=windows.redelivery_schedule,
    )


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("colour = 1\n", "unknown key 'colour'"),
        ("[windows]\nack_wiat = '5s'\n", "windows.ack_wiat"),
        ("[limits]\nbody = '5KiB'\n", "limits.body"),
        ("[windows]\nack_wait = 5\n", "must be a string"),
        ("[windows]\nmax_attempts = 0\n", "at least 1"),
        ("windows = 3\n", "must be a table"),
        ("port = 'x'\n", "not a TCP port"),
        ("port = 0\n", "not a TCP port"),
        ("[limits]\ndisplay_cap = '64KiB'\n", "display_cap"),
        ("[limits]\nbody_cap = '1MiB'\n", "body_cap must not exceed 256KiB"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_load_config_file_errors_name_the_problem(tmp_path: Path, toml: str, needle: str) -> None:
    """Each bad config.toml is refused with a message naming the key or problem."""
    path = tmp_path / "config.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=needle):
        load_config(path, environ={})


def test_load_config_reports_every_problem_at_once(tmp_path: Path) -> None:
    """Three mistakes in the file and one in the environment: all four in one error, so the
    user fixes them in one go instead of one per start."""
    path = tmp_path / "config.toml"
    path.write_text("colour = 1\nport = 'x'\n[windows]\nack_wiat = '5s'\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path, environ={"PAGER_WINDOW_LEASE_TTL": "soon"})
    message = str(refused.value)
    assert message.startswith("4 problems in the configuration:\n- ")
    for needle in ("unknown key 'colour'", "windows.ack_wiat", "not a TCP port",
                   "PAGER_WINDOW_LEASE_TTL"):  # fmt: skip
        assert needle in message


def test_load_config_unknown_window_variable(tmp_path: Path) -> None:
    """A misspelt PAGER_WINDOW_* is an error listing the known ones."""
    with pytest.raises(ConfigError, match=r"PAGER_WINDOW_ACKWAIT: unknown setting.*ACK_WAIT"):
        load_config(tmp_path / "c.toml", environ={"PAGER_WINDOW_ACKWAIT": "1s"})


def test_load_config_ignores_other_pager_variables(tmp_path: Path) -> None:
    """Variables such as PAGER_TOKEN are not settings and are not refused."""
    config = load_config(tmp_path / "c.toml", environ={"PAGER_TOKEN": "t", "PAGER_URL": "u"})
    assert config.port is None


def test_load_config_allow_force(tmp_path: Path) -> None:
    """`allow_force` defaults to true, reads a TOML boolean, and refuses anything else."""
    path = tmp_path / "config.toml"
    assert load_config(path, environ={}).allow_force is True
    path.write_text("allow_force = false\n")
    assert load_config(path, environ={}).allow_force is False
    for bad in ("'false'", "0", "'no'"):
        path.write_text(f"allow_force = {bad}\n")
        with pytest.raises(ConfigError, match="allow_force must be true or false"):
            load_config(path, environ={})


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_load_config_accepts_loopback_hosts(tmp_path: Path, host: str) -> None:
    """Any loopback address is accepted without `allow_remote`."""
    assert load_config(tmp_path / "c.toml", environ={"PAGER_HOST": host}).host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "10.0.0.1", "example.org"])
def test_load_config_refuses_non_loopback_host_without_allow_remote(
    tmp_path: Path, host: str
) -> None:
    """A non-loopback bind (from config.toml or PAGER_HOST) is refused, naming the way out;
    with `allow_remote = true` in config.toml it is accepted (and warned about at start)."""
    path = tmp_path / "config.toml"
    path.write_text(f"host = {host!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match=r"not a loopback address.*allow_remote = true"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match="not a loopback address"):
        load_config(tmp_path / "none.toml", environ={"PAGER_HOST": host})
    path.write_text(f'host = "{host}"\nallow_remote = true\n')
    config = load_config(path, environ={})
    assert (config.host, config.allow_remote) == (host, True)


def test_load_config_allow_remote_is_a_boolean_from_the_file_only(tmp_path: Path) -> None:
    """`allow_remote` takes a TOML boolean; no environment variable can turn it on."""
    path = tmp_path / "config.toml"
    path.write_text('allow_remote = "yes"\n')
    with pytest.raises(ConfigError, match="allow_remote must be true or false"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match="not a loopback address"):
        load_config(
            tmp_path / "none.toml", environ={"PAGER_HOST": "0.0.0.0", "PAGER_ALLOW_REMOTE": "1"}
        )


def test_remote_warning_names_the_host_and_the_way_back() -> None:
    """What `pager start`/`status` show for a remote bind names it and how to undo it."""
    warning = remote_warning("0.0.0.0")
    assert "listening on 0.0.0.0" in warning
    assert "Remove host and allow_remote" in warning


# --- The store (SPEC §13, issue 14) and the host name ------------------------------------------

PG_URL = "postgresql://pager@db.example:5432/pager?sslmode=verify-full"


def _private(path: Path, text: str = "s3cret-pw\n", mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_store_defaults_to_sqlite(tmp_path: Path) -> None:
    """No `store`: the embedded SQLite store, exactly as a default Config."""
    config = load_config(tmp_path / "config.toml", environ={"HOME": str(tmp_path)})
    assert config.store == StoreConfig() == Config().store
    assert (config.store.kind, config.store.url, config.store.password_file) == (
        "sqlite",
        None,
        None,
    )
    assert config.store.read_password() is None
    assert config.store.display() == "sqlite (embedded)"
    path = tmp_path / "config.toml"
    path.write_text('store = "sqlite"\n')
    assert load_config(path, environ={}).store.kind == "sqlite"
    assert load_config(tmp_path / "none.toml", environ={"PAGER_STORE": "sqlite"}).store == (
        StoreConfig()
    )


def test_store_postgresql_url_from_the_file(tmp_path: Path) -> None:
    """A postgresql:// URL (or postgres://) is kept, written as postgresql://."""
    path = tmp_path / "config.toml"
    path.write_text(f'store = "{PG_URL}"\n')
    store = load_config(path, environ={"HOME": str(tmp_path)}).store
    assert (store.kind, store.url, store.password_file) == ("postgresql", PG_URL, None)
    assert store.source == f"{path} store"
    assert store.read_password() is None  # libpq reads PGPASSFILE / ~/.pgpass itself
    path.write_text('store = "postgres://db.example/pager"\n')
    assert load_config(path, environ={"HOME": str(tmp_path)}).store.url == (
        "postgresql://db.example/pager"
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://db.example/pager",
        "postgresql://pager@db.example:1/pager",
        "postgresql://pager@db.example:65535/pager",
        "postgresql://pager@[::1]:5432/pager",
        "postgresql:///pager?host=/var/run/postgresql",
        "postgresql://pager@db.example/pager?sslmode=require&connect_timeout=5"
        "&application_name=pager&sslrootcert=/etc/ssl/ca.pem&sslcert=/c.pem&sslkey=/c.key",
        "postgresql://db.example/pager?sslrootcert=system",
        "postgresql://db.example/pager?sslmode=disable",
    ],
)
def test_store_accepted_urls(tmp_path: Path, url: str) -> None:
    """Hosts (name, IPv6, socket directory), ports and the allowed parameters are accepted."""
    store = load_config(tmp_path / "c.toml", environ={"PAGER_STORE": url, "HOME": str(tmp_path)})
    assert (store.store.kind, store.store.url) == ("postgresql", url)


def test_pager_store_beats_the_file(tmp_path: Path) -> None:
    """PAGER_STORE wins over `store` in config.toml, as PAGER_PORT over `port`; an empty
    variable counts as unset."""
    path = tmp_path / "config.toml"
    path.write_text('store = "postgresql://file.example/pager"\n')
    home = {"HOME": str(tmp_path)}
    env = {**home, "PAGER_STORE": "postgresql://env.example/pager"}
    store = load_config(path, environ=env).store
    assert (store.url, store.source) == ("postgresql://env.example/pager", "PAGER_STORE")
    assert load_config(path, environ={**home, "PAGER_STORE": "sqlite"}).store.kind == "sqlite"
    assert load_config(path, environ={**home, "PAGER_STORE": ""}).store.url == (
        "postgresql://file.example/pager"
    )
    # A bad file value is not looked at when the variable chooses the store.
    path.write_text('store = "mysql://x/y"\n')
    assert load_config(path, environ=env).store.url == "postgresql://env.example/pager"


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("mysql://db.example/pager", r"store is a mysql:// URL; write \"sqlite\".*postgresql://"),
        ("sqlite:///var/pager.db", r"store is a sqlite:// URL"),
        ("db.example/pager", "store is not a URL"),
        ("postgresql://db.example:0/pager", r"port is not a TCP port \(1-65535\)"),
        ("postgresql://db.example:65536/pager", "port is not a TCP port"),
        ("postgresql://db.example:five/pager", "port is not a TCP port"),
        ("postgresql://db.example:/pager", "port is not a TCP port"),
        ("postgresql://db.example", "names no database"),
        ("postgresql://db.example/", "names no database"),
        ("postgresql:///pager", "names no host"),
        ("postgresql://pager@:5432/pager", "names no host"),
        ("postgresql://db.example/pager?host=", "host parameter is empty"),
        ("postgresql://a.example,b.example/pager", "several hosts"),
        ("postgresql://[::1/pager", "host is not valid"),
        ("postgresql://db.example/pager?sslmode=verify", r"sslmode 'verify' is not one of.*"),
        ("postgresql://db.example/pager?sslmode=", "sslmode '' is not one of"),
        ("postgresql://db.example/pager?target_session_attrs=any",
         r"parameter 'target_session_attrs' is not accepted; accepted: sslmode"),
        ("postgresql://db.example/pager?dbname=x", "parameter 'dbname' is not accepted"),
        ("postgresql://db.example/pager?sslmode=require&sslmode=disable", "sslmode twice"),
        ("postgresql://db.example/pager?sslmode", "query is not name=value"),
        ("postgresql://db.example/pager?connect_timeout=0", "connect_timeout '0'.*at least 1"),
        ("postgresql://db.example/pager?connect_timeout=soon", "connect_timeout 'soon'"),
        ("postgresql://db.example/pager?sslrootcert=ca.pem", "sslrootcert 'ca.pem' is not an abs"),
        ("postgresql://db.example/pager?passfile=pgpass", "passfile 'pgpass' is not an absolute"),
        ("postgresql://db.example/pager#x", "#fragment"),
    ],
)  # fmt: skip
def test_store_refusals_name_the_source_and_the_rule(tmp_path: Path, url: str, needle: str) -> None:
    """Each bad store is refused naming where it came from (variable or file) and the rule."""
    env = {"PAGER_STORE": url, "HOME": str(tmp_path)}
    with pytest.raises(ConfigError, match=f"^PAGER_STORE: .*{needle}"):
        load_config(tmp_path / "none.toml", environ=env)
    path = tmp_path / "config.toml"
    path.write_text(f"store = {url!r}\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))} store: .*{needle}"):
        load_config(path, environ={"HOME": str(tmp_path)})


@pytest.mark.parametrize("toml", ["store = 5\n", 'store = ""\n', "store = ['a']\n"])
def test_store_in_the_file_must_be_a_non_empty_string(tmp_path: Path, toml: str) -> None:
    """A store that is not a string, or an empty one, is refused."""
    path = tmp_path / "config.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=r"store.*(must be a string|is empty)"):
        load_config(path, environ={})


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://pager:hunter2-SECRET@db.example:5432/pager",
        "postgres://pager:hunter2-SECRET@db.example/pager?sslmode=require",
        "postgresql://:hunter2-SECRET@db.example/pager",
        "postgresql://pager:hunter2-SECRET/x@db.example/pager",  # an unencoded / in it
        "postgresql://pager:hunter2-SECRET#x@db.example/pager",  # an unencoded # in it
        "postgresql://pager:hunter2%2FSECRET@db.example/pager",
        "postgresql://db.example/pager?password=hunter2-SECRET",
        "postgresql://pager:hunter2-SECRET@db.example:99999/pager?sslmode=bad&x=1",
    ],
)
def test_store_url_with_a_password_is_refused_without_echoing_it(tmp_path: Path, url: str) -> None:
    """A password in the URL is refused; the message says where to put it and never holds
    the password (nor the URL)."""
    path = tmp_path / "config.toml"
    path.write_text(f"store = {url!r}\n")
    for env, where in (({"PAGER_STORE": url}, "PAGER_STORE"), ({}, f"{path} store")):
        with pytest.raises(ConfigError) as refused:
            load_config(path, environ={**env, "HOME": str(tmp_path)})
        message = str(refused.value)
        assert message.startswith(f"{where}: the store URL holds a password")
        assert "store_password_file" in message
        assert "PGPASSFILE" in message
        assert "hunter2" not in message
        assert "SECRET" not in message
        assert refused.value.__cause__ is None
        assert refused.value.__suppress_context__ or refused.value.__context__ is None


def test_store_config_refuses_a_password_and_never_shows_one() -> None:
    """StoreConfig itself refuses a URL with a password, so display() and repr() are safe."""
    with pytest.raises(ValueError, match="must not hold a password") as refused:
        StoreConfig(kind="postgresql", url="postgresql://u:hunter2@h/db")
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ValueError, match="has a URL"):
        StoreConfig(kind="postgresql")
    store = StoreConfig(
        kind="postgresql", url=PG_URL, password_file=Path("/etc/pager/pw"), source="PAGER_STORE"
    )
    assert store.display() == f"{PG_URL} (password from /etc/pager/pw)"
    assert repr(store) == f"StoreConfig({store.display()!r})"


def test_store_password_file(tmp_path: Path) -> None:
    """`store_password_file` (absolute or ~/…, mode 600) is checked at load and read only by
    read_password: its first line without the line end."""
    path = tmp_path / "config.toml"
    secret = _private(tmp_path / "pw", "s3cret pw \r\nsecond line\n")
    path.write_text(f'store = "{PG_URL}"\nstore_password_file = "{secret}"\n')
    store = load_config(path, environ={"HOME": str(tmp_path)}).store
    assert store.password_file == secret
    assert "s3cret" not in repr(store) + store.display()
    assert store.read_password() == "s3cret pw "
    path.write_text(f'store = "{PG_URL}"\nstore_password_file = "~/pw"\n')
    assert load_config(path, environ={"HOME": str(tmp_path)}).store.password_file == secret
    # Checked again at read: emptied or opened up since the load.
    secret.write_text("\n")
    with pytest.raises(ConfigError, match=f"store_password_file {secret}: is empty"):
        store.read_password()
    secret.chmod(0o640)
    with pytest.raises(ConfigError, match="chmod 600"):
        store.read_password()


@pytest.mark.parametrize(
    ("value", "mode", "needle"),
    [
        ("{dir}/pw", 0o644, r"store_password_file {dir}/pw: is readable or writable by others"
         r" \(mode 644\); a password file must be private: chmod 600 {dir}/pw"),
        ("{dir}/pw", 0o620, "mode 620.*chmod 600"),
        ("{dir}/pw", 0o604, "mode 604.*chmod 600"),
        ("{dir}/missing", 0o600, "store_password_file {dir}/missing: no such file"),
        ("pw", 0o600, "'pw' is not an absolute path"),
        ("./pw", 0o600, "'./pw' is not an absolute path"),
        ("{dir}", 0o600, "is not a regular file"),
        ("", 0o600, "must be a path"),
    ],
)  # fmt: skip
def test_store_password_file_refusals(tmp_path: Path, value: str, mode: int, needle: str) -> None:
    """Too open, missing, relative, not a file: refused naming the file and the fix."""
    _private(tmp_path / "pw", mode=mode)
    path = tmp_path / "config.toml"
    path.write_text(f'store = "{PG_URL}"\nstore_password_file = "{value.format(dir=tmp_path)}"\n')
    with pytest.raises(ConfigError, match=needle.format(dir=re.escape(str(tmp_path)))):
        load_config(path, environ={"HOME": str(tmp_path)})


def test_store_password_file_is_ignored_with_sqlite(tmp_path: Path) -> None:
    """The SQLite store does not use it, so an unusable one does not stop it."""
    path = tmp_path / "config.toml"
    path.write_text(f'store_password_file = "{tmp_path}/missing"\n')
    assert load_config(path, environ={}).store == StoreConfig()


def test_store_reports_the_password_file_and_the_url_together(tmp_path: Path) -> None:
    """A bad password file and a bad URL are two problems in one error."""
    path = tmp_path / "config.toml"
    path.write_text('store = "postgresql://db.example"\nstore_password_file = "pw"\n')
    with pytest.raises(ConfigError, match=r"^2 problems.*\n.*absolute path.*\n.*no database"):
        load_config(path, environ={"HOME": str(tmp_path)})


def test_pgpass_file_too_open_is_refused(tmp_path: Path) -> None:
    """Without store_password_file, the password file libpq would read (the URL's passfile,
    else PGPASSFILE, else ~/.pgpass) is refused when others can read it; absent is fine."""
    env = {"PAGER_STORE": PG_URL, "HOME": str(tmp_path)}
    assert load_config(tmp_path / "c.toml", environ=env).store.kind == "postgresql"
    pgpass = _private(tmp_path / ".pgpass", "*:*:*:pager:pw\n", mode=0o644)
    with pytest.raises(ConfigError, match=f"password file {re.escape(str(pgpass))}.*chmod 600"):
        load_config(tmp_path / "c.toml", environ=env)
    pgpass.chmod(0o600)
    assert load_config(tmp_path / "c.toml", environ=env).store.password_file is None
    other = _private(tmp_path / "other", mode=0o660)
    with pytest.raises(ConfigError, match=f"^PGPASSFILE {re.escape(str(other))}: .*chmod 600"):
        load_config(tmp_path / "c.toml", environ={**env, "PGPASSFILE": str(other)})
    with pytest.raises(ConfigError, match="PGPASSFILE 'rel' is not an absolute path"):
        load_config(tmp_path / "c.toml", environ={**env, "PGPASSFILE": "rel"})
    url = f"{PG_URL}&passfile={other}"
    with pytest.raises(ConfigError, match=r"the store URL's passfile .*chmod 600"):
        load_config(tmp_path / "c.toml", environ={**env, "PAGER_STORE": url})
    # With store_password_file, libpq never reads its own file: not checked.
    path = tmp_path / "config.toml"
    path.write_text(f'store = "{PG_URL}"\nstore_password_file = "{_private(tmp_path / "pw")}"\n')
    pgpass.chmod(0o644)
    assert load_config(path, environ={"HOME": str(tmp_path)}).store.password_file is not None


def test_host_name_defaults_to_the_short_host_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Default: the machine's name up to the first dot, lower-cased, made a DNS label."""
    config = load_config(tmp_path / "none.toml", environ={})
    expected = socket.gethostname().split(".")[0].lower()
    if re.fullmatch(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", expected):
        assert config.host_name == expected
    assert config.host_name == Config().host_name == default_host_name()
    for machine, name in [
        ("Build-VM.corp.example", "build-vm"),
        ("My_Mac", "my-mac"),
        ("-x-", "x"),
        ("_", "localhost"),
        ("a" * 80, "a" * 63),
    ]:
        fake = os.uname_result(("Linux", machine, "6", "#1", "x86_64"))
        monkeypatch.setattr(os, "uname", lambda fake=fake: fake)
        assert default_host_name() == name


def test_host_table_name_and_bind(tmp_path: Path) -> None:
    """`[host] name` sets the host name (lowered); `[host] bind` is the bind address, since
    TOML cannot hold both `host = "…"` and `[host]`. `host = "…"` keeps working."""
    path = tmp_path / "config.toml"
    path.write_text('[host]\nname = "Laptop-2"\n')
    config = load_config(path, environ={})
    assert (config.host_name, config.host) == ("laptop-2", "127.0.0.1")
    path.write_text('[host]\nname = "vm"\nbind = "::1"\n')
    config = load_config(path, environ={})
    assert (config.host_name, config.host) == ("vm", "::1")
    assert load_config(path, environ={"PAGER_HOST": "127.0.0.3"}).host == "127.0.0.3"
    assert load_config(path, environ={}, host="127.0.0.4").host == "127.0.0.4"
    path.write_text('[host]\nbind = "0.0.0.0"\n')
    with pytest.raises(ConfigError, match="not a loopback address"):
        load_config(path, environ={})


@pytest.mark.parametrize(
    "name", ["", "-vm", "vm-", "a" * 64, "build.vm", "build_vm", "vm 2", "é", "5", "true"]
)
def test_host_name_refusals(tmp_path: Path, name: str) -> None:
    """A host name that is not a DNS label is refused, naming `[host] name` and the rule."""
    path = tmp_path / "config.toml"
    value = "true" if name == "true" else 5 if name == "5" else repr(name).replace("'", '"')
    path.write_text(f"[host]\nname = {value}\n")
    with pytest.raises(ConfigError, match=r"\[host\] name: .* is not a host name; write 1-63"):
        load_config(path, environ={})


def test_host_name_accepts_dns_labels(tmp_path: Path) -> None:
    """63 characters, digits first, inner hyphens: all fine."""
    path = tmp_path / "config.toml"
    for name in ("a" * 63, "0vm", "a-b-c", "x"):
        path.write_text(f'[host]\nname = "{name}"\n')
        assert load_config(path, environ={}).host_name == name


def test_host_table_unknown_keys_are_refused(tmp_path: Path) -> None:
    """Unknown keys in [host] are refused like those of [windows] or [cli]."""
    path = tmp_path / "config.toml"
    path.write_text('[host]\nnmae = "vm"\n')
    with pytest.raises(ConfigError, match=r"unknown key host\.nmae; known keys: bind, name"):
        load_config(path, environ={})
    path.write_text("host = 5\n")
    with pytest.raises(ConfigError, match=r"host must be a string .* or a \[host\] table"):
        load_config(path, environ={})


def test_unknown_top_level_keys_list_the_store_keys(tmp_path: Path) -> None:
    """The store keys are known keys; a misspelt one is refused with the list."""
    path = tmp_path / "config.toml"
    path.write_text('stor = "sqlite"\n')
    with pytest.raises(ConfigError, match=r"unknown key 'stor'.*store, store_password_file"):
        load_config(path, environ={})


def test_importing_config_does_not_import_psycopg(tmp_path: Path) -> None:
    """`pager.config` is on the CLI's fast paths: importing it, and loading a postgresql
    store, loads no database driver (nor `socket`)."""
    code = (
        "import sys, pathlib, pager.config\n"
        "config = pager.config.load_config(pathlib.Path(sys.argv[1]),"
        " environ={'PAGER_STORE': sys.argv[2], 'HOME': sys.argv[3]})\n"
        "assert config.store.kind == 'postgresql', config\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('psycopg', 'psycopg_binary', 'psycopg_pool', 'socket')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c.toml"), PG_URL, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "[]"
