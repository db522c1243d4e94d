"""Entries Pager adds inside configuration files that are not its own (a harness's settings).

Some harnesses enable a plugin only through their own settings file, which the user owns and
edits too (Claude Code's `~/.claude/settings.json`). `pager setup` adds exactly its entries
there, and records for each file what it was before, what Pager wrote and which keys it added,
in `<state dir>/installed/<what>.json`, so that `pager setup --undo` takes back exactly that:

- a file still as Pager left it is restored byte for byte (or removed, if Pager created it);
- a file the user changed since keeps their changes: only Pager's keys whose value is still
  Pager's are taken out (and the tables Pager created for them, when left empty);
- a key the user already had, with any value, is theirs: never changed, never removed.

A file that is not valid JSON (or not a JSON object), or is a symbolic link (a dotfiles
manager's: replacing it would cut the link), is reported and left untouched.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pager.install.files import InstallError, _make_parents, _write_atomic, record_path


@dataclass(frozen=True)
class Entry:
    """One key Pager sets in a JSON object file: `keys` is its path from the top."""

    path: Path
    keys: tuple[str, ...]
    value: Any

    @property
    def label(self) -> str:
        return ".".join(self.keys)


class EntryStatus(enum.Enum):
    ADDED = "added"  # set by this run
    UNCHANGED = "unchanged"  # already there with Pager's value
    SKIPPED = "skipped"  # the file or the key holds something else: left alone
    REMOVED = "removed"  # taken out again (undo)
    KEPT = "kept"  # undo: changed since Pager added it, so left
    MISSING = "missing"  # undo: already gone


@dataclass(frozen=True)
class EntryOutcome:
    path: Path
    key: str
    status: EntryStatus
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        data = {"path": str(self.path), "key": self.key, "status": self.status.value}
        if self.reason:
            data["reason"] = self.reason
        return data


def apply_entries(
    state_root: Path, what: str, entries: Sequence[Entry], *, dry_run: bool = False
) -> list[EntryOutcome]:
    """Add each entry that is missing; with `dry_run`, decide the same and write nothing."""
    record = _load(state_root, what)
    outcomes: list[EntryOutcome] = []
    by_file: dict[Path, list[Entry]] = {}
    for entry in entries:
        by_file.setdefault(entry.path, []).append(entry)
    for path, wanted in by_file.items():
        outcomes += _apply_file(record, path, wanted, dry_run=dry_run)
    if not dry_run:
        _save(state_root, what, record)
    return outcomes


def undo_entries(state_root: Path, what: str) -> list[EntryOutcome]:
    """Take back what `apply_entries` added (see the module's rules); forget the record."""
    record = _load(state_root, what)
    outcomes: list[EntryOutcome] = []
    for key, item in record.items():
        outcomes += _undo_file(Path(key), item)
    _save(state_root, what, {})
    return outcomes


def recorded(state_root: Path, what: str) -> bool:
    return bool(_load(state_root, what))


# -- one file --------------------------------------------------------------------------------


def _apply_file(
    record: dict[str, Any], path: Path, wanted: list[Entry], *, dry_run: bool
) -> list[EntryOutcome]:
    if path.is_symlink():  # replacing it would cut a link a dotfiles manager keeps
        why = (
            f"{path} is a symbolic link; Pager does not write through links: add "
            + " and ".join(e.label for e in wanted)
            + " to the file it points to yourself"
        )
        return [EntryOutcome(path, e.label, EntryStatus.SKIPPED, why) for e in wanted]
    before = _read(path)
    try:
        data = {} if before is None else _parse(path, before)
    except InstallError as exc:
        return [EntryOutcome(path, e.label, EntryStatus.SKIPPED, str(exc)) for e in wanted]
    mine = record.get(str(path), {}).get("entries", [])
    outcomes: list[EntryOutcome] = []
    added: list[Entry] = []
    for entry in wanted:
        parent = _walk(data, entry.keys[:-1], create=True)
        name = entry.keys[-1]
        if parent is None:
            why = "a table on its path holds your own value; left alone"
            outcomes.append(EntryOutcome(path, entry.label, EntryStatus.SKIPPED, why))
        elif name not in parent:
            parent[name] = entry.value
            added.append(entry)
            outcomes.append(EntryOutcome(path, entry.label, EntryStatus.ADDED))
        elif parent[name] == entry.value:
            outcomes.append(EntryOutcome(path, entry.label, EntryStatus.UNCHANGED))
        else:
            why = "holds your own value; left alone (remove it and run again to let Pager set it)"
            outcomes.append(EntryOutcome(path, entry.label, EntryStatus.SKIPPED, why))
    if not added or dry_run:
        return outcomes
    content = (json.dumps(data, indent=2) + "\n").encode()
    item = record.setdefault(str(path), _first_record(path, before))
    if before is None:
        item["dirs"] = [str(created) for created in _make_parents(path.parent)]
    mode = _mode(path) if before is not None else 0o600
    _write_atomic(path, content, mode)
    item["entries"] = [*mine, *({"keys": list(e.keys), "value": e.value} for e in added)]
    item["written_sha256"] = _digest(content)
    return outcomes


def _undo_file(path: Path, item: dict[str, Any]) -> list[EntryOutcome]:
    entries = [(tuple(e["keys"]), e["value"]) for e in item.get("entries", [])]
    labels = [".".join(keys) for keys, _ in entries]
    current = _read(path)
    if current is None:
        return [EntryOutcome(path, label, EntryStatus.MISSING, "already gone") for label in labels]
    original = item.get("original")
    if _digest(current) == item.get("written_sha256"):  # as Pager left it: restore exactly
        if original is None:
            path.unlink()
            for directory in reversed(item.get("dirs", [])):
                with contextlib.suppress(OSError):
                    Path(directory).rmdir()  # only when empty
        else:
            _write_atomic(path, base64.b64decode(original), int(item.get("mode", 0o600)))
        return [EntryOutcome(path, label, EntryStatus.REMOVED) for label in labels]
    try:
        data = _parse(path, current)
    except InstallError as exc:
        why = f"changed since Pager added it and {exc}; take Pager's keys out yourself"
        return [EntryOutcome(path, label, EntryStatus.KEPT, why) for label in labels]
    before = {} if original is None else _parse_quietly(base64.b64decode(original))
    outcomes: list[EntryOutcome] = []
    for (keys, value), label in zip(entries, labels, strict=True):
        parent = _walk(data, keys[:-1], create=False)
        if parent is None or keys[-1] not in parent:
            outcomes.append(EntryOutcome(path, label, EntryStatus.MISSING, "already gone"))
        elif parent[keys[-1]] != value:
            why = "changed since Pager added it; remove it yourself if you no longer need it"
            outcomes.append(EntryOutcome(path, label, EntryStatus.KEPT, why))
        else:
            del parent[keys[-1]]
            _prune(data, before, keys[:-1])
            outcomes.append(EntryOutcome(path, label, EntryStatus.REMOVED))
    if any(outcome.status is EntryStatus.REMOVED for outcome in outcomes):
        _write_atomic(path, (json.dumps(data, indent=2) + "\n").encode(), _mode(path))
    return outcomes


def _walk(data: dict[str, Any], keys: Sequence[str], *, create: bool) -> dict[str, Any] | None:
    """The table at `keys` (created when missing and `create`), or None when the path holds
    something that is not a table."""
    table = data
    for key in keys:
        if key not in table:
            if not create:
                return None
            table[key] = {}
        found = table[key]
        if not isinstance(found, dict):
            return None
        table = found
    return table


def _prune(data: dict[str, Any], before: dict[str, Any], keys: Sequence[str]) -> None:
    """Remove the tables on `keys` that are empty now and did not exist before Pager."""
    for depth in range(len(keys), 0, -1):
        parent = _walk(data, keys[: depth - 1], create=False)
        name = keys[depth - 1]
        existed = _walk(before, keys[:depth], create=False) is not None
        if parent is None or parent.get(name) != {} or existed:
            return
        del parent[name]


# -- reading and the record ------------------------------------------------------------------


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InstallError(
            f"{path} is not valid JSON ({exc}); fix it or move it aside, then run pager setup again"
        ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; fix it, then run pager setup")
    return data


def _parse_quietly(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror or exc}") from None


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o600


def _first_record(path: Path, before: bytes | None) -> dict[str, Any]:
    return {
        "original": None if before is None else base64.b64encode(before).decode(),
        "mode": _mode(path),
        "entries": [],
        "dirs": [],
    }


def _digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _load(state_root: Path, what: str) -> dict[str, Any]:
    path = record_path(state_root, what)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InstallError(
            f"the record {path} cannot be read ({exc}); move it aside to start afresh"
        ) from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise InstallError(f"the record {path} is not Pager's; move it aside to start afresh")
    return files


def _save(state_root: Path, what: str, files: dict[str, Any]) -> None:
    path = record_path(state_root, what)
    if not files:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps({"what": what, "files": files}, indent=2, sort_keys=True) + "\n"
    with contextlib.suppress(OSError):
        if path.read_bytes() == text.encode():
            return  # a run that changed nothing writes nothing
    _write_atomic(path, text.encode(), 0o600)
