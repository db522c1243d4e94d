"""Configuration: flag > environment (`PAGER_*`) > `config.toml` > default (SPEC §3, §9).

Every window has a key in `[windows]` and an override `PAGER_WINDOW_<NAME>`; sizes live in
`[limits]` with `PAGER_LIMIT_<NAME>`. Bad values are a startup error that names the source.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import attrs

from pager.domain.errors import PagerError
from pager.domain.names import validate_alias

T = TypeVar("T")


class ConfigError(Exception):
    """A configuration value is wrong; the message names where it came from and the fix."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DEFAULT_HOST = "127.0.0.1"
_SIZE = re.compile(r"^\s*(\d+)\s*(B|KiB|MiB)?\s*$")
_UNIT_BYTES = {"B": 1, "KiB": 1024, "MiB": 1024 * 1024}


def parse_duration(text: str, *, source: str) -> float:
    """`500ms`, `30s`, `15m`, `2h`, `7d` → seconds (> 0)."""
    match = _DURATION.match(text)
    seconds = float(match[1]) * _UNIT_SECONDS[match[2]] if match else math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise ConfigError(
            f"{source}: {text!r} is not a positive duration; write a number followed by "
            "ms, s, m, h or d (e.g. 500ms, 30s, 2h, 7d)"
        )
    return seconds


def parse_schedule(text: str, *, source: str) -> tuple[float, ...]:
    """A comma-separated list of durations whose last delay repeats (`2s, 10s, 30m`)."""
    parts = [part for part in text.split(",")]
    if not text.strip() or any(not part.strip() for part in parts):
        raise ConfigError(
            f"{source}: {text!r} is not a schedule; write comma-separated durations "
            "such as '2s, 10s, 30m' (the last one repeats)"
        )
    return tuple(parse_duration(part, source=source) for part in parts)


def parse_count(value: object, *, source: str, zero: bool = False) -> int:
    """A whole number of at least 1 (at least 0 with `zero`: 0 turns a limit off)."""
    text = str(value).strip()
    least = 0 if zero else 1
    if isinstance(value, bool) or not text.isdigit() or int(text) < least:
        what = "0 (off) or more" if zero else "at least 1"
        raise ConfigError(f"{source}: {value!r} is not a whole number of {what}")
    return int(text)


def parse_size(value: object, *, source: str) -> int:
    """`32KiB`, `1MiB`, `4096` (bytes) → bytes (> 0)."""
    match = _SIZE.match(str(value)) if not isinstance(value, bool) else None
    size = int(match[1]) * _UNIT_BYTES[match[2] or "B"] if match else 0
    if size < 1:
        raise ConfigError(
            f"{source}: {value!r} is not a size; write a whole number of bytes, "
            "optionally with KiB or MiB (e.g. 32KiB)"
        )
    return size


@attrs.frozen
class Windows:
    """The windows of SPEC §9, in seconds (the schedule as a tuple; the last delay repeats)."""

    lease_ttl: float = 90.0
    stream_grace: float = 15.0
    ack_wait: float = 60.0
    redelivery: tuple[float, ...] = (2.0, 10.0, 30.0, 120.0, 600.0, 1800.0)
    max_attempts: int = 50
    message_expiry: float = 7 * 86400.0
    unused: float = 3600.0
    resumable_retention: float = 7 * 86400.0
    named_archive: float = 30 * 86400.0
    archive_retention: float = 30 * 86400.0
    idempotency: float = 86400.0
    event_retention: float = 7 * 86400.0
    event_heartbeat: float = 15.0  # a comment line on an idle operator stream

    def redelivery_delay(self, attempt: int) -> float:
        """Delay before attempt `attempt + 1`, given that `attempt` (≥ 1) attempts were made."""
        return self.redelivery[min(max(attempt, 1), len(self.redelivery)) - 1]


@attrs.frozen
class Limits:
    """Size limits of SPEC §9, in bytes; the operator stream's buffer, in events; and the loop
    guard and send rates of SPEC §8.1 (counts; 0 turns one off)."""

    body_cap: int = 32 * 1024
    display_cap: int = 4 * 1024
    request_cap: int = 1024 * 1024
    event_buffer: int = 1024  # a count of events, not bytes: see _limit_value
    max_hops: int = 3
    agent_sends_per_hour: int = 120
    pair_sends_per_hour: int = 60
    token_sends_per_hour: int = 600


@attrs.frozen
class Config:
    host: str = DEFAULT_HOST
    port: int | None = None  # None: chosen at first start, then kept
    windows: Windows = Windows()
    limits: Limits = Limits()
    allow_force: bool = True  # false: every `force` (registration, alias tool) is refused
    allow_remote: bool = False  # true: `host` may be a non-loopback address (warned about)
    #: The person's alias in every workspace (SPEC §4.2); None: the login name.
    person_name: str | None = None


_WINDOW_FIELDS = {field.name: field for field in attrs.fields(Windows)}
_LIMIT_FIELDS = {field.name: field for field in attrs.fields(Limits)}
#: Limits that are counts, where 0 turns the limit off (SPEC §8.1).
_GUARD_COUNTS = {"max_hops", "agent_sends_per_hour", "pair_sends_per_hour", "token_sends_per_hour"}
_TOP_KEYS = {"host", "port", "allow_force", "allow_remote", "windows", "limits", "cli"}
_CLI_KEYS = {"name": "the person's alias in every workspace (default: the login name)"}


def _window_value(name: str, raw: object, source: str) -> object:
    if name == "max_attempts":
        return parse_count(raw, source=source)
    if name == "redelivery" and isinstance(raw, list):
        raw = ",".join(str(item) for item in raw)
    if not isinstance(raw, str):
        raise ConfigError(f"{source}: {raw!r} must be a string such as '30s'")
    if name == "redelivery":
        return parse_schedule(raw, source=source)
    return parse_duration(raw, source=source)


def _limit_value(name: str, raw: object, source: str) -> int:
    # An operator stream may fall this many events behind before it is cut off: a count.
    if name == "event_buffer":
        return parse_count(raw, source=source)
    if name in _GUARD_COUNTS:
        return parse_count(raw, source=source, zero=True)
    return parse_size(raw, source=source)


def _port(raw: object, source: str) -> int:
    text = str(raw).strip()
    if isinstance(raw, bool) or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(f"{source}: {raw!r} is not a TCP port (1-65535)")
    return int(text)


def _policy(data: dict[str, Any], path: Path, key: str, default: bool) -> bool:
    # Policies are read from config.toml only, no variable: a broker starts on demand with the
    # environment of whichever caller came first, and that caller must not choose them.
    raw = data.get(key, default)
    if not isinstance(raw, bool):
        raise ConfigError(
            f"{path}: {key} must be true or false (a TOML boolean, no quotes), not {raw!r}"
        )
    return raw


def _person_name(raw: object, path: Path) -> str:
    if not isinstance(raw, str):
        raise ConfigError(f"{path}: [cli] name must be a string such as 'ada'")
    try:
        return validate_alias(raw)
    except PagerError as exc:
        raise ConfigError(f"{path}: [cli] name: {exc.message}") from None


def is_loopback(host: str) -> bool:
    """Whether `host` names a loopback address (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def remote_warning(host: str) -> str:
    return (
        f"listening on {host}, which is not a loopback address (allow_remote = true in"
        " config.toml): other machines can reach this broker and try credentials over plain"
        " HTTP. Remove host and allow_remote from config.toml to listen on 127.0.0.1 only."
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or remove the file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc


def _table(
    data: dict[str, Any], name: str, known: Mapping[str, object], path: Path, problems: list[str]
) -> dict[str, Any]:
    """The table `name` without its unknown keys, each of which is a problem."""
    table = data.get(name, {})
    if not isinstance(table, dict):
        problems.append(f"{path}: [{name}] must be a table")
        return {}
    kept = {}
    for key, value in table.items():
        if key in known:
            kept[key] = value
        else:
            problems.append(
                f"{path}: unknown key {name}.{key}; known keys: {', '.join(sorted(known))}"
            )
    return kept


def load_config(
    path: Path,
    *,
    environ: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
) -> Config:
    """Read `config.toml` at `path`, then the environment, then the flags given. Every problem
    found is reported at once (one ConfigError, a line each), not only the first."""
    env = os.environ if environ is None else environ
    data = _read_toml(path)
    problems: list[str] = []

    def checked(step: Callable[[], T], fallback: T) -> T:
        try:
            return step()
        except ConfigError as exc:
            problems.append(str(exc))
            return fallback

    for key in data:
        if key not in _TOP_KEYS:
            problems.append(
                f"{path}: unknown key {key!r}; known keys: {', '.join(sorted(_TOP_KEYS))}"
            )

    windows: dict[str, object] = {}
    for key, raw in _table(data, "windows", _WINDOW_FIELDS, path, problems).items():
        where = f"{path} [windows] {key}"
        windows[key] = checked(partial(_window_value, key, raw, where), None)
    limits: dict[str, object] = {}
    for key, raw in _table(data, "limits", _LIMIT_FIELDS, path, problems).items():
        limits[key] = checked(partial(_limit_value, key, raw, f"{path} [limits] {key}"), None)

    person_name = _table(data, "cli", _CLI_KEYS, path, problems).get("name")
    if person_name is not None:
        person_name = checked(partial(_person_name, person_name, path), None)

    for var, raw in env.items():
        for prefix, fields, target in (
            ("PAGER_WINDOW_", _WINDOW_FIELDS, windows),
            ("PAGER_LIMIT_", _LIMIT_FIELDS, limits),
        ):
            if not var.startswith(prefix):
                continue
            name = var.removeprefix(prefix).lower()
            if name not in fields:
                known = ", ".join(prefix + field.upper() for field in sorted(fields))
                problems.append(f"{var}: unknown setting; known: {known}")
                continue
            value = _window_value if target is windows else _limit_value
            target[name] = checked(partial(value, name, raw, var), None)

    chosen_host = host or env.get("PAGER_HOST") or data.get("host") or DEFAULT_HOST
    allow_remote = checked(partial(_policy, data, path, "allow_remote", False), False)
    allow_force = checked(partial(_policy, data, path, "allow_force", True), True)
    if not isinstance(chosen_host, str):
        problems.append(f"{path}: host must be a string such as '127.0.0.1'")
        chosen_host = DEFAULT_HOST
    elif not is_loopback(chosen_host) and not allow_remote:
        problems.append(
            f"host {chosen_host!r} is not a loopback address, and Pager listens on loopback only"
            f" (its tokens travel over plain HTTP). Use 127.0.0.1 or ::1; to listen on"
            f" {chosen_host!r} anyway, also set allow_remote = true in {path}"
        )
    chosen_port: int | None = None
    if port is not None:
        chosen_port = checked(partial(_port, port, "--port"), None)
    elif env.get("PAGER_PORT"):
        chosen_port = checked(partial(_port, env["PAGER_PORT"], "PAGER_PORT"), None)
    elif "port" in data:
        chosen_port = checked(partial(_port, data["port"], f"{path} port"), None)
    if problems:
        raise ConfigError(
            problems[0]
            if len(problems) == 1
            else f"{len(problems)} problems in the configuration:\n- " + "\n- ".join(problems)
        )

    config_limits = Limits(**limits)  # type: ignore[arg-type]
    if config_limits.display_cap > config_limits.body_cap:
        raise ConfigError("display_cap must not exceed body_cap; lower display_cap")
    return Config(
        host=chosen_host,
        port=chosen_port,
        windows=Windows(**windows),  # type: ignore[arg-type]
        limits=config_limits,
        allow_force=allow_force,
        person_name=person_name,
        allow_remote=allow_remote,
    )
