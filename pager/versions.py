"""The version rules of Pager, declared in one place (SPEC §5 "Versions").

Stdlib-only and import-free: the CLI's fast paths (`status`, hooks) read these.
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: this module is on the hook's and status's fast paths.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

#: The installed package's version; pyproject.toml reads it from here.
VERSION = "0.1.0"

#: The database schema this build reads and writes. The store checks that its
#: migration list ends at this number (tests/store).
SCHEMA_VERSION = 13


def identity_mismatch(lock: dict[str, Any], health: dict[str, Any]) -> str | None:
    """Why the broker answering /health is not the one holding the lock, or None if they agree.

    A caller adopts a running broker only when the lock file and `/health` agree on
    instance id, pid and schema version.
    """
    for key in ("instance_id", "pid", "schema_version"):
        if lock.get(key) != health.get(key):
            return f"{key} differs (lock: {lock.get(key)!r}, /health: {health.get(key)!r})"
    return None


def schema_verdict(running_schema_version: int) -> Literal["adopt", "replace", "refuse"]:
    """What a caller does with a running broker of the given schema version.

    Same version: adopt it. Older: this newer build replaces it (stop, migrate, start).
    Newer: refuse; this build could not open its database either.
    """
    if running_schema_version == SCHEMA_VERSION:
        return "adopt"
    return "replace" if running_schema_version < SCHEMA_VERSION else "refuse"
