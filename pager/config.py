"""Configuration: flag > environment (`PAGER_*`) > `config.toml` > default (SPEC §3, §9).

Every window has a key in `[windows]` and an override `PAGER_WINDOW_<NAME>`; sizes live in
`[limits]` with `PAGER_LIMIT_<NAME>`. Bad values are a startup error that names the source.

The store (`store`, `PAGER_STORE`; SPEC §13) is checked here with the standard library only:
this module is imported on the CLI's fast paths, so it never imports a database driver.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

from pager import enforce
from pager.domain.body_limit import BODY_CAP
from pager.domain.errors import PagerError
from pager.domain.json_bounds import STRING_CHARS_MAX
from pager.domain.limits import SEND_LIMIT_KEYS, SendLimits
from pager.domain.names import validate_alias
from pager.domain.windows import Windows

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
class Limits:
    """Size limits of SPEC §9, in bytes; the operator stream's buffer, in events; and the loop
    guard and send rates of SPEC §8.1 (`send`, pager/domain/limits.py: counts, 0 turns one
    off), read from the same `[limits]` table."""

    body_cap: int = BODY_CAP
    display_cap: int = 4 * 1024
    request_cap: int = 1024 * 1024
    event_buffer: int = 1024  # a count of events, not bytes: see _limit_value
    send: SendLimits = attrs.field(factory=SendLimits)
    #: Wake runs at once on this broker (docs/wake.md), and the size each run's log is cut at.
    wake_runs: int = 2
    wake_log_cap: int = 1024 * 1024


HOST_NAME_RULE = "1-63 characters of a-z, 0-9 and -, not starting or ending with - (a DNS label)"
_HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def default_host_name() -> str:
    """The short host name (up to the first dot), lower-cased, as a DNS label.

    `os.uname().nodename` is what `socket.gethostname()` returns on Linux and macOS, without
    importing `socket` on the CLI's fast paths. A machine name that is not a DNS label
    (`My_Mac`) is made one (`my-mac`) rather than refused: a single machine never needs it."""
    short = os.uname().nodename.split(".", 1)[0].lower()
    label = re.sub(r"[^a-z0-9-]+", "-", short).strip("-")[:63].strip("-")
    return label or "localhost"


def parse_host_name(raw: object, *, source: str) -> str:
    """`[host] name`: a DNS label, lower case (upper case given is lowered)."""
    name = raw.strip().lower() if isinstance(raw, str) else None
    if name is None or not _HOST_NAME.fullmatch(name):
        raise ConfigError(f"{source}: {raw!r} is not a host name; write {HOST_NAME_RULE}")
    return name


#: PostgreSQL's sslmode values (libpq), weakest first.
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
#: The query parameters a `store` URL may carry, each with what it is. Others are refused: some
#: carry secrets (`password`, `sslpassword`), some would change what Pager relies on.
STORE_PARAMS = {
    "sslmode": "TLS to the database: " + ", ".join(SSLMODES),
    "sslrootcert": "the CA certificate(s) to verify the server with (absolute path, or system)",
    "sslcert": "the client certificate (absolute path)",
    "sslkey": "the client certificate's key (absolute path)",
    "sslcrl": "a certificate revocation list (absolute path)",
    "connect_timeout": "seconds to wait for a connection (a whole number, at least 1)",
    "application_name": "the name the server shows for the connection",
    "host": "the server's host, or a unix socket directory (absolute path)",
    "passfile": "the PostgreSQL password file to use (absolute path, mode 600)",
}
_PATH_PARAMS = {"sslrootcert", "sslcert", "sslkey", "sslcrl", "passfile"}
_STORE_EXAMPLE = "postgresql://pager@db.example:5432/pager?sslmode=verify-full"
_PASSWORD_FIX = (
    "remove the password from the URL (write user@host, not user:password@host) and put it in"
    " a file named by store_password_file in config.toml (mode 600), or in the PostgreSQL"
    " password file (PGPASSFILE, else ~/.pgpass)"
)


def _url_has_password(url: str) -> bool:
    try:
        if urlsplit(url).password is not None:
            return True
    except ValueError:  # an unbalanced [ in the host: refused later
        pass
    # A password with an unencoded / or # splits the URL elsewhere: a ':' before an '@' in
    # the part before the query is a password too (percent-encode an '@' in a database name).
    authority = url.partition("://")[2].partition("?")[0]
    return ":" in authority.rpartition("@")[0]


@attrs.frozen(repr=False)
class StoreConfig:
    """Where the broker keeps its state: the embedded SQLite file (the default) or a PostgreSQL
    database shared by the brokers of several machines (SPEC §13).

    `url` never holds a password (refused at construction); the password is read from
    `password_file` (`read_password`) when the backend connects, or by libpq itself from the
    PostgreSQL password file when `password_file` is None. Safe to show and to log."""

    kind: Literal["sqlite", "postgresql"] = "sqlite"
    #: The postgresql:// URL (postgres:// written as postgresql://); None for SQLite.
    url: str | None = None
    #: `store_password_file` from config.toml (absolute); None: libpq's password file, if any.
    password_file: Path | None = None
    #: Where the store was chosen: "default", "PAGER_STORE" or the config file's path.
    source: str = attrs.field(default="default", eq=False)

    def __attrs_post_init__(self) -> None:
        if (self.kind == "postgresql") != (self.url is not None):
            raise ValueError("a postgresql store has a URL and only a postgresql store has one")
        if self.url is not None and _url_has_password(self.url):
            raise ValueError("a store URL must not hold a password")  # never echoed

    def display(self) -> str:
        """What `pager status` shows: the kind or URL, and where the password comes from."""
        if self.url is None:
            return "sqlite (embedded)"
        if self.password_file is not None:
            return f"{self.url} (password from {self.password_file})"
        return f"{self.url} (password, if any, from PGPASSFILE or ~/.pgpass)"

    def __repr__(self) -> str:
        return f"StoreConfig({self.display()!r})"

    def read_password(self) -> str | None:
        """The password from `password_file` (its first line, without the line end), read when
        the backend connects; None without a file (libpq then reads PGPASSFILE or ~/.pgpass).
        The file is checked again (it may have changed since the configuration was loaded)."""
        if self.password_file is None:
            return None
        source = f"store_password_file {self.password_file}"
        _check_secret_file(self.password_file, source=source, missing_ok=False)
        try:
            with self.password_file.open(encoding="utf-8") as file:
                line = file.readline()
        except (OSError, UnicodeError):  # the exception could quote the file's bytes
            raise ConfigError(f"{source}: cannot be read as UTF-8 text") from None
        password = line.rstrip("\r\n")
        if not password:
            raise ConfigError(f"{source}: is empty; write the password on its first line")
        return password


def _check_secret_file(path: Path, *, source: str, missing_ok: bool) -> None:
    """A password file must be a regular file only its owner can read or write."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if missing_ok:
            return
        raise ConfigError(
            f"{source}: no such file; create it with the password on its first line"
            f" (chmod 600 {path})"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{source}: is not a regular file")
    if mode & 0o077:
        raise ConfigError(
            f"{source}: is readable or writable by others (mode {stat.S_IMODE(mode):03o});"
            f" a password file must be private: chmod 600 {path}"
        )


def _expand_home(text: str, home: str) -> Path:
    if text == "~" or text.startswith("~/"):
        return Path(home + text[1:])
    return Path(text)


def parse_store(
    text: str,
    *,
    source: str,
    password_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    pgpass: bool = True,
) -> StoreConfig:
    """`"sqlite"` or a `postgresql://` URL → StoreConfig. No message quotes the URL, which
    could hold a password. Without `password_file` (and unless `pgpass` is false), the
    PostgreSQL password file libpq would read is checked when it exists."""
    if text.strip().lower() == "sqlite":
        return StoreConfig(source=source)
    accepted = f'write "sqlite" (the default) or a postgresql:// URL such as {_STORE_EXAMPLE}'
    scheme, sep, _ = text.partition("://")
    if not sep or scheme.lower() not in ("postgresql", "postgres"):
        what = f"a {scheme.lower()}:// URL" if sep and scheme.isalnum() else "not a URL"
        raise ConfigError(f"{source}: store is {what}; {accepted}")
    if _url_has_password(text):
        raise ConfigError(f"{source}: the store URL holds a password; {_PASSWORD_FIX}")
    try:
        parts = urlsplit(text)
    except ValueError:  # its message could quote the URL
        raise ConfigError(f"{source}: the store URL's host is not valid; {accepted}") from None
    if parts.fragment:
        raise ConfigError(f"{source}: the store URL must not have a #fragment; {accepted}")
    try:
        params = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ConfigError(f"{source}: the store URL's query is not name=value&…") from None
    query: dict[str, str] = {}
    for name, value in params:
        if name == "password":
            raise ConfigError(f"{source}: the store URL holds a password; {_PASSWORD_FIX}")
        if name not in STORE_PARAMS:
            raise ConfigError(
                f"{source}: the store URL's parameter {name!r} is not accepted; accepted:"
                f" {', '.join(STORE_PARAMS)}"
            )
        if name in query:
            raise ConfigError(f"{source}: the store URL gives {name} twice")
        query[name] = value
    _check_params(query, source)
    if "," in parts.netloc:
        raise ConfigError(f"{source}: the store URL lists several hosts; give one")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.rpartition("@")[2].endswith(":")):
        raise ConfigError(f"{source}: the store URL's port is not a TCP port (1-65535)")
    if not parts.hostname and "host" not in query:
        raise ConfigError(
            f"{source}: the store URL names no host; write postgresql://user@host:port/database"
            " (or ?host=/a/socket/directory)"
        )
    database = unquote(parts.path.removeprefix("/"))
    if not database.strip():
        raise ConfigError(
            f"{source}: the store URL names no database; write postgresql://user@host:port/database"
        )
    if password_file is None and pgpass:
        # libpq reads the password file itself; Pager only refuses one others can read, which
        # libpq would otherwise ignore with a warning nobody sees.
        env = os.environ if environ is None else environ
        passfile = query.get("passfile") or env.get("PGPASSFILE")
        where = "the store URL's passfile" if "passfile" in query else "PGPASSFILE"
        if not passfile:
            passfile, where = str(Path(_home(env)) / ".pgpass"), "the PostgreSQL password file"
        elif not passfile.startswith("/"):
            raise ConfigError(f"{where} {passfile!r} is not an absolute path")
        _check_secret_file(Path(passfile), source=f"{where} {passfile}", missing_ok=True)
    url = "postgresql://" + text.partition("://")[2]  # urlunsplit drops an empty host's //
    return StoreConfig(kind="postgresql", url=url, password_file=password_file, source=source)


def _check_params(query: Mapping[str, str], source: str) -> None:
    sslmode = query.get("sslmode")
    if sslmode is not None and sslmode not in SSLMODES:
        raise ConfigError(
            f"{source}: the store URL's sslmode {sslmode!r} is not one of {', '.join(SSLMODES)}"
        )
    timeout = query.get("connect_timeout")
    if timeout is not None and not (timeout.isdigit() and int(timeout) >= 1):
        raise ConfigError(
            f"{source}: the store URL's connect_timeout {timeout!r} is not a whole number of"
            " seconds of at least 1 (0 would wait forever)"
        )
    for name in _PATH_PARAMS & query.keys():
        value = query[name]
        if not (value.startswith("/") or (name == "sslrootcert" and value == "system")):
            raise ConfigError(
                f"{source}: the store URL's {name} {value!r} is not an absolute path (the"
                " broker's working directory is whichever command started it)"
            )
    host = query.get("host")
    if host is not None and not host.strip():
        raise ConfigError(f"{source}: the store URL's host parameter is empty")


def _load_store(
    data: Mapping[str, Any], path: Path, env: Mapping[str, str], problems: list[str]
) -> StoreConfig:
    """`PAGER_STORE` (when set and not empty) > `store` in config.toml > SQLite; with
    `store_password_file` from config.toml only. Problems are appended, SQLite returned."""
    text: object = env.get("PAGER_STORE")
    source = "PAGER_STORE"
    if not text and "store" in data:
        text, source = data["store"], f"{path} store"
    if text is None or text == "":
        if "store" in data:  # `store = ""` in the file
            problems.append(f'{source}: store is empty; write "sqlite" or a postgresql:// URL')
        return StoreConfig()
    if not isinstance(text, str):
        problems.append(f"{source}: must be a string such as 'sqlite' or {_STORE_EXAMPLE!r}")
        return StoreConfig()
    password_file = None
    named = text.strip().lower() != "sqlite" and "store_password_file" in data
    if named:  # only checked when it will be used: a SQLite store ignores it
        try:
            password_file = _password_file(data["store_password_file"], path, env)
        except ConfigError as exc:
            problems.append(str(exc))
    try:
        return parse_store(
            text, source=source, password_file=password_file, environ=env, pgpass=not named
        )
    except ConfigError as exc:
        problems.append(str(exc))
        return StoreConfig()


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or str(Path.home())


def _password_file(raw: object, path: Path, env: Mapping[str, str]) -> Path:
    source = f"{path} store_password_file"
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f"{source}: must be a path such as '/etc/pager/store-password'")
    file = _expand_home(raw, _home(env))
    if not file.is_absolute():
        raise ConfigError(
            f"{source}: {raw!r} is not an absolute path (or ~/…); the broker's working"
            " directory is whichever command started it"
        )
    _check_secret_file(file, source=f"{source} {file}", missing_ok=False)
    return file


@attrs.frozen
class Config:
    host: str = DEFAULT_HOST
    port: int | None = None  # None: chosen at first start, then kept
    windows: Windows = attrs.field(factory=Windows)
    limits: Limits = Limits()
    allow_force: bool = True  # false: every `force` (registration, alias tool) is refused
    allow_remote: bool = False  # true: `host` may be a non-loopback address (warned about)
    #: The person's alias in every workspace (SPEC §4.2); None: the login name.
    person_name: str | None = None
    #: This broker's name among the hosts sharing a store (`[host] name`, SPEC §13); not the
    #: bind address, which is `host`.
    host_name: str = attrs.field(factory=default_host_name)
    store: StoreConfig = StoreConfig()


_WINDOW_FIELDS = {field.name: field for field in attrs.fields(Windows)}
#: Every `[limits]` key: the sizes and counts of `Limits`, and the send limits' keys (counts,
#: where 0 turns the limit off).
_LIMIT_FIELDS: dict[str, attrs.Attribute[Any]] = {
    **{field.name: field for field in attrs.fields(Limits) if field.name != "send"},
    **dict(zip(SEND_LIMIT_KEYS, attrs.fields(SendLimits), strict=True)),
}
_TOP_KEYS = {
    "host", "port", "allow_force", "allow_remote", "windows", "limits", "cli",
    "store", "store_password_file", "reservations",
}  # fmt: skip
_CLI_KEYS = {"name": "the person's alias in every workspace (default: the login name)"}
#: `host` is the bind address as a string, or a table: TOML cannot hold both `host = "…"` and
#: `[host]`, so the table has the bind address too.
_HOST_KEYS = {
    "name": "this broker's host name among the hosts sharing a store",
    "bind": "the bind address (as top-level host = '…')",
}


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
    if name in ("event_buffer", "wake_runs"):
        return parse_count(raw, source=source)
    if name in SEND_LIMIT_KEYS:
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

    host_name: str | None = None
    file_host = data.get("host")
    if isinstance(file_host, dict):
        host_table = _table(data, "host", _HOST_KEYS, path, problems)
        if "name" in host_table:
            where = f"{path} [host] name"
            host_name = checked(partial(parse_host_name, host_table["name"], source=where), None)
        file_host = host_table.get("bind")

    store = _load_store(data, path, env, problems)
    if "reservations" in data:  # read by the edit hooks and the git guard (pager/enforce.py)
        try:
            enforce.parse(data["reservations"], str(path))
        except enforce.EnforceError as exc:
            problems.append(str(exc))

    chosen_host = host or env.get("PAGER_HOST") or file_host or DEFAULT_HOST
    allow_remote = checked(partial(_policy, data, path, "allow_remote", False), False)
    allow_force = checked(partial(_policy, data, path, "allow_force", True), True)
    if not isinstance(chosen_host, str):
        problems.append(
            f"{path}: host must be a string such as '127.0.0.1' (the bind address), or a [host]"
            " table"
        )
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

    send = SendLimits(**{key: limits.pop(key) for key in SEND_LIMIT_KEYS if key in limits})  # type: ignore[arg-type]
    config_limits = Limits(**limits, send=send)  # type: ignore[arg-type]
    if config_limits.display_cap > config_limits.body_cap:
        raise ConfigError("display_cap must not exceed body_cap; lower display_cap")
    if config_limits.body_cap > STRING_CHARS_MAX:
        raise ConfigError(
            f"body_cap must not exceed {STRING_CHARS_MAX // 1024}KiB, the longest text a JSON"
            " request may carry; lower body_cap"
        )
    return Config(
        host=chosen_host,
        port=chosen_port,
        windows=Windows(**windows),  # type: ignore[arg-type]
        limits=config_limits,
        allow_force=allow_force,
        person_name=person_name,
        allow_remote=allow_remote,
        host_name=host_name or default_host_name(),
        store=store,
    )
