"""The state directory and its small files: paths, permissions, the secret, the lock."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pager.launch.files import ensure_secret, read_json, write_private_json
from pager.launch.lock import BrokerLock, LockHeld, read_lock_identity
from pager.launch.paths import StateDirError, StatePaths, default_state_dir, ensure_state_dir


def test_default_state_dir_prefers_pager_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """PAGER_HOME wins; else XDG_STATE_HOME/pager; else ~/.local/state/pager (Linux)."""
    monkeypatch.setenv("PAGER_HOME", "/tmp/somewhere")
    assert default_state_dir() == "/tmp/somewhere"
    monkeypatch.delenv("PAGER_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", "/x/state")
    assert default_state_dir() == "/x/state/pager"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", "/home/u")
    assert default_state_dir() == "/home/u/.local/state/pager"


def test_default_state_dir_refuses_other_platforms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Platforms other than Linux and macOS get a clear refusal."""
    monkeypatch.delenv("PAGER_HOME", raising=False)
    monkeypatch.setattr("sys.platform", "win32")
    with pytest.raises(StateDirError, match="Linux and macOS"):
        default_state_dir()


def test_ensure_state_dir_creates_private_and_tightens(tmp_path: Path) -> None:
    """The directory is created 0700, and an existing one of ours is tightened to 0700."""
    paths = StatePaths(tmp_path / "a" / "home")
    ensure_state_dir(paths)
    assert (paths.root.stat().st_mode & 0o777) == 0o700
    assert paths.logs.is_dir()
    paths.root.chmod(0o755)
    ensure_state_dir(paths)
    assert (paths.root.stat().st_mode & 0o777) == 0o700


def test_ensure_state_dir_refuses_a_file(tmp_path: Path) -> None:
    """PAGER_HOME naming a regular file, or under one, is refused with the fix."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for root in (blocker, blocker / "below"):
        with pytest.raises(StateDirError, match="PAGER_HOME"):
            ensure_state_dir(StatePaths(root))


def test_ensure_secret_created_once_and_private(tmp_path: Path) -> None:
    """Concurrent creators all read the same secret; it is 0600 and never rewritten."""
    path = tmp_path / "secret"
    with ThreadPoolExecutor(8) as pool:
        secrets = set(pool.map(lambda _: ensure_secret(path), range(32)))
    assert len(secrets) == 1
    assert (path.stat().st_mode & 0o777) == 0o600
    assert ensure_secret(path) == secrets.pop()
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]  # no temp files left


def test_ensure_secret_empty_file_is_an_error(tmp_path: Path) -> None:
    """An emptied secret is not silently replaced: the message says what to do."""
    path = tmp_path / "secret"
    path.write_text("")
    with pytest.raises(ValueError, match="delete it"):
        ensure_secret(path)


def test_write_private_json_atomic_and_private(tmp_path: Path) -> None:
    """broker.json is replaced whole, mode 0600; unreadable JSON reads as None."""
    path = tmp_path / "broker.json"
    write_private_json(path, {"a": 1})
    write_private_json(path, {"a": 2})
    assert read_json(path) == {"a": 2}
    assert (path.stat().st_mode & 0o777) == 0o600
    path.write_text("{half")
    assert read_json(path) is None
    path.write_text(json.dumps([1, 2]))
    assert read_json(path) is None


def test_broker_lock_exclusive_and_cleared_on_release(tmp_path: Path) -> None:
    """A second acquirer gets LockHeld; release clears the identity and frees the lock."""
    path = tmp_path / "broker.lock"
    lock = BrokerLock.acquire(path)
    lock.write_identity({"pid": os.getpid(), "instance_id": "x", "schema_version": 2})
    with pytest.raises(LockHeld):
        BrokerLock.acquire(path)
    assert read_lock_identity(path) == {"pid": os.getpid(), "instance_id": "x", "schema_version": 2}
    lock.release()
    assert read_lock_identity(path) is None
    BrokerLock.acquire(path).release()
