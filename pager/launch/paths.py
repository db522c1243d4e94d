"""Where Pager keeps its state (SPEC §3). Stdlib-only: the CLI's fast paths use it, without
`pathlib` (which imports `re`, `fnmatch` and `urllib.parse`): a `StatePaths` is made from a
string, and its `Path`s are made when asked for."""

from __future__ import annotations

import os
import stat

from pager.launch.statedir import UnsupportedPlatform, state_dir

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from pathlib import Path

#: The files of the state directory that a quick command reads (`StatePaths.file`, which
#: makes no `Path`: `pager.launch.files.read_secret(paths.file(SECRET))`).
BROKER_JSON = "broker.json"
LOCK = "broker.lock"
SECRET = "secret"


class StateDirError(Exception):
    """The state directory cannot be used; the message says why and what to do."""


def default_state_dir() -> str:
    """`PAGER_HOME`, else the platform's user state directory for `pager`."""
    try:
        return state_dir()
    except UnsupportedPlatform as exc:
        raise StateDirError(f"{exc} Set PAGER_HOME only on a supported platform.") from None


class StatePaths:
    """The files inside one state directory. A plain class, not a dataclass or a NamedTuple:
    `dataclasses` and `typing` cost every quick command (`send`, the hook) milliseconds."""

    __slots__ = ("directory",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.directory = os.path.normpath(os.fspath(root))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatePaths) and other.directory == self.directory

    def __hash__(self) -> int:
        return hash(self.directory)

    def __repr__(self) -> str:
        return f"StatePaths(root={self.directory!r})"

    def file(self, name: str) -> str:
        """The path of the file `name` in the state directory, as a string (no `pathlib`)."""
        return os.path.join(self.directory, name)

    @property
    def root(self) -> Path:
        from pathlib import Path

        return Path(self.directory)

    @property
    def database(self) -> Path:
        return self.root / "pager.db"

    @property
    def lock(self) -> Path:
        return self.root / LOCK

    @property
    def start_lock(self) -> Path:
        """Serialises concurrent starters so that only one of them spawns a broker."""
        return self.root / "start.lock"

    @property
    def broker_json(self) -> Path:
        return self.root / BROKER_JSON

    @property
    def stop_note(self) -> Path:
        """Who asked the broker to stop, written just before the SIGTERM (it logs why)."""
        return self.root / "stop-note.json"

    @property
    def secret(self) -> Path:
        return self.root / SECRET

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def broker_log(self) -> Path:
        return self.logs / "broker.log"


def state_paths(root: str | os.PathLike[str] | None = None) -> StatePaths:
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
