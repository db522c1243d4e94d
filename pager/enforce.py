"""`[reservations] enforce`: what the edit hooks and the git guard do about another agent's
exclusive reservation (docs/reservations.md, "What is enforced where"): `deny` (the default)
refuses, `warn` lets the edit through with a note to the model, `off` does not ask.

It is set in Pager's own config.toml (the person's, in the state directory; never a file in the
repository, which an agent could edit to switch its own guard off), for every workspace and per
workspace, the longest matching directory winning:

    [reservations]
    enforce = "deny"
    [reservations.workspaces]
    "/home/ada/scratch" = "off"

Stdlib-only and read by the hooks on each tool call: a config.toml that does not mention
`reservations` is not parsed at all. `pager serve` validates the table with `parse` (so a typo
is an error there, not a silent default here); the hooks read it leniently (an unreadable file
means the default).
"""

from __future__ import annotations

import os

MODES = ("deny", "warn", "off")
DEFAULT = "deny"
KEYS = ("enforce", "workspaces")


class EnforceError(ValueError):
    """The `[reservations]` table is wrong, in words saying what to write instead."""


def parse(table: object, source: str) -> tuple[str, dict[str, str]]:
    """(the default mode, {absolute directory: mode}) from the `[reservations]` table."""
    if not isinstance(table, dict):
        raise EnforceError(f"{source}: [reservations] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise EnforceError(
            f"{source}: unknown key reservations.{unknown[0]}; known keys: {', '.join(KEYS)}"
        )
    default = _mode(table.get("enforce", DEFAULT), f"{source}: reservations.enforce")
    places = table.get("workspaces", {})
    if not isinstance(places, dict):
        raise EnforceError(
            f"{source}: [reservations.workspaces] must be a table of directory = mode"
        )
    workspaces = {}
    for directory, mode in places.items():
        where = f"{source}: reservations.workspaces.{directory!r}"
        if not os.path.isabs(os.path.expanduser(directory)):
            raise EnforceError(f"{where}: give the workspace's absolute path")
        workspaces[_directory(directory)] = _mode(mode, where)
    return default, workspaces


def mode_for(directory: str) -> str:
    """The mode for a tool call or commit in `directory`; the default when the configuration
    cannot be read (the broker reports a broken file when it starts)."""
    from pager.launch.statedir import state_dir

    path = os.path.join(state_dir(), "config.toml")
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError:
        return DEFAULT
    if b"reservations" not in raw:
        return DEFAULT
    import tomllib

    try:
        default, workspaces = parse(tomllib.loads(raw.decode()).get("reservations", {}), path)
    except (ValueError, UnicodeDecodeError):
        return DEFAULT
    here = _directory(directory)
    best = ""
    for place in workspaces:
        if (here == place or here.startswith(place.rstrip("/") + "/")) and len(place) > len(best):
            best = place
    return workspaces[best] if best else default


def _mode(value: object, where: str) -> str:
    if value not in MODES:
        raise EnforceError(f"{where}: {value!r} is not one of {', '.join(MODES)}")
    return str(value)


def _directory(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))
