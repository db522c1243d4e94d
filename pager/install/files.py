"""Write files for hosts idempotently, and remember exactly what was written.

An install is a list of `Planned` files. `apply` writes each one that is missing or differs,
creating parent directories as needed, and records every path with the SHA-256 of what it
wrote, plus the directories it created, in `<state dir>/installed/<what>.json`. `remove`
(`--uninstall`) deletes exactly the recorded files whose content is still what Pager wrote,
keeps (and reports) the ones a person changed since, and removes the directories the install
created once they are empty.

A file that exists with other content and is not Pager's (not in the record, or changed since
Pager wrote it) is never overwritten unless `force` is given.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pager.versions import VERSION

RECORD_DIR = "installed"


class InstallError(Exception):
    """An install cannot proceed; the message says what to do (exit status 1)."""


class Status(enum.Enum):
    WRITTEN = "written"  # did not exist
    UPDATED = "updated"  # Pager's own earlier version (or --force) replaced
    UNCHANGED = "unchanged"  # already exactly this content
    SKIPPED = "skipped"  # exists with other content that is not Pager's: left alone
    REMOVED = "removed"  # deleted (uninstall, or no longer part of the install)
    KEPT = "kept"  # changed since Pager wrote it: not deleted
    MISSING = "missing"  # recorded, but already gone


@dataclass(frozen=True)
class Planned:
    """One file an install wants, with its exact content."""

    path: Path
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Outcome:
    """What happened to one path. `is_dir` marks directories (created or removed)."""

    path: Path
    status: Status
    reason: str = ""
    is_dir: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": str(self.path),
            "status": self.status.value,
            "kind": "directory" if self.is_dir else "file",
        }
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass
class Record:
    """`<state dir>/installed/<what>.json`: the files (path → SHA-256) and created directories."""

    what: str
    files: dict[str, str] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "pager_version": VERSION,
            "files": [{"path": path, "sha256": digest} for path, digest in self.files.items()],
            "dirs": list(self.dirs),
            "extra": self.extra,
        }


def record_path(state_root: Path, what: str) -> Path:
    return state_root / RECORD_DIR / f"{what}.json"


def load_record(state_root: Path, what: str) -> Record | None:
    path = record_path(state_root, what)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        files = {str(item["path"]): str(item["sha256"]) for item in data["files"]}
        dirs = [str(item) for item in data["dirs"]]
        extra = data.get("extra") or {}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InstallError(
            f"the install record {path} cannot be read ({exc}); move it aside to start afresh"
        ) from None
    return Record(what, files, dirs, dict(extra))


def save_record(state_root: Path, record: Record) -> None:
    path = record_path(state_root, record.what)
    if not record.files and not record.dirs:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # only when empty
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n"
    with contextlib.suppress(OSError):
        if path.read_bytes() == text.encode():
            return  # a run that changed nothing writes nothing
    _write_atomic(path, text.encode(), 0o600)


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def apply(
    state_root: Path,
    what: str,
    planned: Sequence[Planned],
    *,
    force: bool = False,
    extra: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> list[Outcome]:
    """Write the planned files; remove files of an earlier install that are no longer planned.

    Returns one outcome per planned file (in order), then one per earlier file removed or kept.
    With `dry_run`, the same decisions and outcomes, and nothing written, removed or recorded.
    """
    previous = load_record(state_root, what) or Record(what)
    record = Record(what, dict(previous.files), list(previous.dirs), dict(extra or {}))
    outcomes: list[Outcome] = []
    wanted: set[str] = set()
    for item in planned:
        path = _absolute(item.path)
        key = str(path)
        if key in wanted:
            continue  # two skills directories may name the same place
        wanted.add(key)
        current = _read(path)
        if current == item.content:
            outcomes.append(Outcome(path, Status.UNCHANGED))
        elif current is None:
            if not dry_run:
                for created in _make_parents(path.parent):
                    if str(created) not in record.dirs:
                        record.dirs.append(str(created))
                _write_atomic(path, item.content, item.mode)
            outcomes.append(Outcome(path, Status.WRITTEN))
        elif force or previous.files.get(key) == digest(current):
            if not dry_run:
                _write_atomic(path, item.content, item.mode)
            outcomes.append(Outcome(path, Status.UPDATED))
        else:
            why = (
                "changed since Pager wrote it"
                if key in previous.files
                else "exists and was not written by Pager"
            )
            outcomes.append(Outcome(path, Status.SKIPPED, f"{why}; --force replaces it"))
            continue
        record.files[key] = digest(item.content)
    for key in [key for key in previous.files if key not in wanted]:
        outcomes.append(_remove_file(Path(key), previous.files[key], dry_run=dry_run))
        del record.files[key]
    if dry_run:
        return outcomes
    outcomes += _remove_empty_dirs(record, only_unused=True)
    save_record(state_root, record)
    return outcomes


def remove(state_root: Path, what: str) -> tuple[Record | None, list[Outcome]]:
    """Uninstall: delete the recorded files that are unchanged, then the empty created dirs.

    Returns the record as it was (None when nothing was installed) and the outcomes.
    """
    record = load_record(state_root, what)
    if record is None:
        return None, []
    outcomes = [_remove_file(Path(key), expected) for key, expected in record.files.items()]
    remaining = Record(what, {}, list(record.dirs), record.extra)
    outcomes += _remove_empty_dirs(remaining, only_unused=False)
    remaining.dirs = []  # what is left is no longer Pager's to remove
    save_record(state_root, remaining)
    return record, outcomes


def _remove_file(path: Path, expected: str, *, dry_run: bool = False) -> Outcome:
    current = _read(path)
    if current is None:
        return Outcome(path, Status.MISSING, "already gone")
    if digest(current) != expected:
        return Outcome(path, Status.KEPT, "changed since Pager wrote it; remove it yourself")
    if dry_run:
        return Outcome(path, Status.REMOVED)
    try:
        path.unlink()
    except OSError as exc:
        raise InstallError(f"cannot remove {path}: {exc.strerror or exc}") from None
    return Outcome(path, Status.REMOVED)


def _remove_empty_dirs(record: Record, *, only_unused: bool) -> list[Outcome]:
    """Remove the directories the install created, deepest first, when they are empty.

    With `only_unused`, directories that still hold a recorded file are left alone silently.
    """
    outcomes: list[Outcome] = []
    in_use = {str(parent) for key in record.files for parent in Path(key).parents}
    for directory in sorted(record.dirs, key=lambda item: item.count(os.sep), reverse=True):
        if only_unused and directory in in_use:
            continue
        path = Path(directory)
        try:
            path.rmdir()
        except FileNotFoundError:
            record.dirs.remove(directory)
            continue
        except OSError:
            continue  # not empty: something else lives there now
        record.dirs.remove(directory)
        outcomes.append(Outcome(path, Status.REMOVED, is_dir=True))
    return outcomes


def _absolute(path: Path) -> Path:
    path = path.expanduser()
    if not path.is_absolute():
        raise InstallError(f"{path}: Pager writes only to absolute paths")
    return path


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InstallError(f"{path} is a directory; move it aside and try again") from None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror or exc}") from None


def _make_parents(directory: Path) -> list[Path]:
    """Create `directory` and its missing parents; return the ones created, outermost first."""
    missing: list[Path] = []
    probe = directory
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    missing.reverse()
    for path in missing:
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise InstallError(f"cannot create {path}: {exc.strerror or exc}") from None
    if not directory.is_dir():
        raise InstallError(f"{directory} is not a directory; move it aside and try again")
    return missing


def _write_atomic(path: Path, content: bytes, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.pager-{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        os.chmod(temporary, mode)  # whatever the umask did
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None
