"""A private HOME, XDG directories and PATH for every install test; no npx anywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pager.cli import main

#: The venv's own `pager`, which every file written for a host must run.
VENV_PAGER = str(Path(sys.executable).parent / "pager")


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.state = root / "state" / "pager"
        self.bin = root / "bin"

    def tree(self) -> list[tuple[str, bytes | None]]:
        """Everything under HOME: (relative path, content, or None for a directory)."""
        return sorted(
            (str(path.relative_to(self.home)), None if path.is_dir() else path.read_bytes())
            for path in self.home.rglob("*")
        )

    def files(self) -> set[str]:
        return {str(path) for path in self.home.rglob("*") if path.is_file()}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    environment = Env(tmp_path)
    environment.home.mkdir()
    environment.bin.mkdir()  # PATH: nothing in it, so no npx
    monkeypatch.setenv("HOME", str(environment.home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(environment.home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(environment.home / ".local" / "share"))
    monkeypatch.setenv("PATH", str(environment.bin))
    for name in ("PAGER_HOME", "PAGER_PYTHON", "PAGER_PACKAGE_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda *, group: [])
    return environment


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """`pager ARGV --json`: the exit status and the parsed report."""
    capsys.readouterr()  # what earlier calls printed
    status = main([*argv, "--json"])
    out = capsys.readouterr().out
    return status, json.loads(out)


def paths_with(report: dict[str, Any], status: str) -> set[str]:
    return {item["path"] for item in report["files"] if item["status"] == status}


#: A settings file the user had before: odd formatting, their own plugin entry.
USER_SETTINGS = b'{"model":   "opus",\n  "enabledPlugins": {"theirs@market": false}}\n'
CLAUDE_PLUGIN = (".claude", "plugins", "pager")


def fake_harness(env: Env, name: str) -> Path:
    """An executable `name` on PATH: all that `[detect] executables` looks for."""
    program = env.bin / name
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    return program


@pytest.fixture
def claude(env: Env) -> Path:
    """Claude Code 'installed': its program on PATH and the user's own settings file."""
    fake_harness(env, "claude")
    settings = env.home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(USER_SETTINGS)
    return settings
