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


def test_load_config_unknown_window_variable(tmp_path: Path) -> None:
    """A misspelt PAGER_WINDOW_* is an error listing the known ones."""
    with pytest.raises(ConfigError, match=r"PAGER_WINDOW_ACKWAIT: unknown setting.*ACK_WAIT"):
        load_config(tmp_path / "c.toml", environ={"PAGER_WINDOW_ACKWAIT": "1s"})


def test_load_config_ignores_other_pager_variables(tmp_path: Path) -> None:
    """Variables such as PAGER_TOKEN are not settings and are not refused."""
    config = load_config(tmp_path / "c.toml", environ={"PAGER_TOKEN": "t", "PAGER_URL": "u"})
    assert config.port is None
