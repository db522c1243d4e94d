"""Configuration parsing: durations, schedules, sizes, precedence and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from pager.config import (
    ConfigError,
    Windows,
    load_config,
    parse_duration,
    parse_schedule,
    parse_size,
    remote_warning,
)


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
    assert [windows.redelivery_delay(n) for n in (1, 2, 3, 10)] == [1.0, 2.0, 2.0, 2.0]
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
