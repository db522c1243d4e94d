"""Small private files of the state directory: atomic JSON, the local secret. Stdlib-only."""

from __future__ import annotations

import os

from pager.small_json import loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` atomically with `data` as JSON, mode 0600 (readers never see half a file)."""
    import json  # not at the top: the quick commands read these files and never write one

    write_private_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_private_text(path: Path, text: str) -> None:
    """Replace `path` atomically with `text`, mode 0600 (readers never see half a file)."""
    tmp = _temp_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)


def _temp_beside(path: Path) -> Path:
    """A fresh name in the same directory (so `os.replace`/`os.link` stay atomic)."""
    import secrets  # not at the top: `pager hook` reads files here and never writes one

    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when it is missing, unreadable or not an object."""
    try:
        with open(path, "rb") as file:
            data = loads(file.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_secret(path: str | Path) -> str:
    """The local secret in `path` (a string path: no `pathlib` on a quick command's way), as
    written; OSError when it cannot be read."""
    with open(path, encoding="utf-8") as file:
        return file.read().strip()


def ensure_secret(path: Path) -> str:
    """The local operator credential, created once (0600) and never rewritten.

    Concurrent creators race with `os.link`, which never replaces an existing file, so all of
    them end up reading the same secret.
    """
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    import secrets

    tmp = _temp_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_urlsafe(32) + "\n")
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return _read_secret(path)


def _read_secret(path: Path) -> str:
    value = path.read_text().strip()
    if not value:
        raise ValueError(f"{path} is empty; delete it and run `pager restart` to make a new one")
    return value


def session_token(environ: Mapping[str, str]) -> str | None:
    """The session token of the wrapped launch this process runs in (SPEC §4.2), or None.

    Inside `pager <implementation>` it is in the file `PAGER_TOKEN_FILE` names, which the
    wrapper rewrites when it rejoins; `PAGER_TOKEN` there is the launch relay's credential,
    valid only at the relay (pager/launch/relay.py). Elsewhere `PAGER_TOKEN` is the token."""
    path = environ.get("PAGER_TOKEN_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                return file.read().strip() or None
        except OSError:
            return None  # the launch is over: no session, and never the relay's credential
    token = environ.get("PAGER_TOKEN")
    # A relay credential (`prl_…`) is worth nothing at the broker: never sent there.
    return token if token and not token.startswith("prl_") else None
