"""Where Pager keeps its state (SPEC §3). Stdlib-only: the CLI's fast paths use it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pager.launch.statedir import UnsupportedPlatform, state_dir


class StateDirError(Exception):
    """The state directory cannot be used; the message says why and what to do."""


def default_state_dir() -> Path:
    """`PAGER_HOME`, else the platform's user state directory for `pager`."""
    try:
        return Path(state_dir())
    except UnsupportedPlatform as exc:
        raise StateDirError(f"{exc} Set PAGER_HOME only on a supported platform.") from None


class StatePaths:
    """The files inside one state directory. A plain class, not a dataclass or a NamedTuple:
    `dataclasses` and `typing` cost every quick command (`send`, the hook) milliseconds."""

    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = root

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatePaths) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"StatePaths(root={self.root!r})"

    @property
    def database(self) -> Path:
        return self.root / "pager.db"

    @property
    def lock(self) -> Path:
        return self.root / "broker.lock"

    @property
    def start_lock(self) -> Path:
        """Serialises concurrent starters so that only one of them spawns a broker."""
        return self.root / "start.lock"

    @property
    def broker_json(self) -> Path:
        return self.root / "broker.json"

    @property
    def stop_note(self) -> Path:
        """Who asked the broker to stop, written just before the SIGTERM (it logs why)."""
        return self.root / "stop-note.json"

    @property
    def secret(self) -> Path:
        return self.root / "secret"

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def broker_log(self) -> Path:
        return self.logs / "broker.log"


def state_paths(root: Path | None = None) -> StatePaths:
    return StatePaths(root if root is not None else default_state_dir())


def ensure_state_dir(paths: StatePaths) -> None:
    """Create the state directory (0700) and `logs/`, or say clearly why it cannot be used."""
    root = paths.root
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.logs.mkdir(mode=0o700, exist_ok=True)
    except FileExistsError as exc:
        raise StateDirError(
            f"{exc.filename} exists and is not a directory; move it aside or set PAGER_HOME "
            "to another directory."
        ) from exc
    except OSError as exc:
        raise StateDirError(
            f"cannot create the state directory {root}: {exc.strerror}. "
            "Fix its permissions or set PAGER_HOME to a writable directory."
        ) from exc
    info = root.stat()
    if info.st_uid != os.getuid():
        raise StateDirError(
            f"the state directory {root} belongs to another user (uid {info.st_uid}); "
            "set PAGER_HOME to a directory of your own."
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        root.chmod(0o700)  # ours: keep other local users out of the mail
    if not os.access(root, os.W_OK | os.X_OK):
        raise StateDirError(
            f"the state directory {root} is not writable; fix its permissions "
            "(chmod 700) or set PAGER_HOME to a writable directory."
        )
