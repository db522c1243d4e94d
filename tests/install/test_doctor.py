"""`pager doctor`: each problem found with one line saying what to do, `--json` for scripts.

The problems are made for real in a throwaway home: a stopped broker (none was started), a
foreign `pager` earlier on PATH (Debian's /usr/bin/pager is `less`), a hook file removed or
pointing at another pager, a settings entry missing, a malformed settings file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pager.cli import main
from tests.install.conftest import CLAUDE_PLUGIN, VENV_PAGER, Env, run_json

HOOKS = (*CLAUDE_PLUGIN, "plugins", "pager", "hooks", "hooks.json")


def _checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


@pytest.fixture
def own_pager_on_path(env: Env) -> None:
    (env.bin / "pager").symlink_to(VENV_PAGER)


def test_json_lists_each_check_and_a_stopped_broker_is_a_problem(
    env: Env, own_pager_on_path: None, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = run_json(capsys, "doctor")
    assert status == 1
    assert set(report) == {"ok", "checks"}
    assert report["ok"] is False
    for check in report["checks"]:
        assert set(check) == {"name", "ok", "detail", "fix"}
        assert isinstance(check["ok"], bool)
        assert check["detail"]
        assert bool(check["fix"]) is not check["ok"]  # a fix exactly for each problem
    checks = _checks(report)
    assert checks["broker"]["ok"] is False
    assert checks["broker"]["detail"].startswith("not running")
    assert checks["broker"]["fix"] == "pager start"
    assert checks["path"]["ok"] is True
    assert checks["config"]["ok"] is True

    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  broker: not running" in out
    assert "      do: pager start\n" in out


def test_a_foreign_pager_first_on_path(
    env: Env, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `pager` earlier on PATH that is not this one (here a link to `less`, as Debian's
    /usr/bin/pager is): doctor names it and says how to put this Pager's first."""
    (env.bin / "pager").symlink_to(VENV_PAGER)
    other = env.root / "usr-bin"
    other.mkdir()
    less = other / "less"
    less.write_text("#!/bin/sh\necho 'I am less'\n")
    less.chmod(0o755)
    (other / "pager").symlink_to(less)
    monkeypatch.setenv("PATH", f"{other}:{env.bin}")
    _, report = run_json(capsys, "doctor")
    path = _checks(report)["path"]
    assert path["ok"] is False
    assert f"the first `pager` on PATH is {other / 'pager'}" in path["detail"]
    assert "less" in path["detail"]
    assert (
        path["fix"]
        == f"ln -sf {VENV_PAGER} ~/.local/bin/pager, with ~/.local/bin before {other} on PATH"
    )

    monkeypatch.setenv("PATH", f"{env.bin}:{other}")
    _, report = run_json(capsys, "doctor")
    assert _checks(report)["path"]["ok"] is True

    monkeypatch.setenv("PATH", str(other / "nothing"))
    _, report = run_json(capsys, "doctor")
    assert _checks(report)["path"]["detail"] == "no `pager` on PATH"


def test_a_missing_hook_and_a_hook_of_another_pager(
    env: Env, own_pager_on_path: None, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = run_json(capsys, "doctor")
    assert status == 1
    checks = _checks(report)
    assert checks["skill"]["ok"] is False
    assert checks["skill"]["fix"] == "pager setup"
    assert checks["harness claude hooks and MCP"]["ok"] is False  # not set up yet

    assert main(["setup"]) == 0
    _, report = run_json(capsys, "doctor")
    checks = _checks(report)
    for name in ("skill", "harness claude hooks and MCP", "harness claude settings"):
        assert checks[name]["ok"] is True, checks[name]

    hooks = env.home.joinpath(*HOOKS)
    text = hooks.read_text()
    hooks.unlink()
    _, report = run_json(capsys, "doctor")
    wiring = _checks(report)["harness claude hooks and MCP"]
    assert wiring["ok"] is False
    assert wiring["detail"] == f"missing: ~/{'/'.join(HOOKS)}"
    assert wiring["fix"] == "pager setup --only claude"

    hooks.write_text(text.replace(VENV_PAGER, "/usr/bin/pager"))
    _, report = run_json(capsys, "doctor")
    wiring = _checks(report)["harness claude hooks and MCP"]
    assert wiring["ok"] is False
    assert wiring["detail"].startswith("not this Pager's")

    settings = json.loads(claude.read_text())
    del settings["enabledPlugins"]["pager@pager-local"]
    claude.write_text(json.dumps(settings))
    _, report = run_json(capsys, "doctor")
    enabled = _checks(report)["harness claude settings"]
    assert enabled["ok"] is False
    assert "enabledPlugins.pager@pager-local" in enabled["detail"]
    assert enabled["fix"] == "pager setup --only claude"

    assert main(["setup"]) == 1  # the hook file is not Pager's now: left alone, reported
    hooks.unlink()
    assert main(["setup"]) == 0
    _, report = run_json(capsys, "doctor")
    checks = _checks(report)
    assert checks["harness claude hooks and MCP"]["ok"] is True
    assert checks["harness claude settings"]["ok"] is True


def test_a_malformed_settings_file_is_reported_and_untouched(
    env: Env, own_pager_on_path: None, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = b"{ this is not json"
    claude.write_bytes(broken)
    _, report = run_json(capsys, "doctor")
    settings = _checks(report)["harness claude settings"]
    assert settings["ok"] is False
    assert f"{claude} is not valid JSON" in settings["detail"]
    assert "fix it or move it aside" in settings["fix"]
    assert claude.read_bytes() == broken


def test_doctor_changes_nothing(
    env: Env, own_pager_on_path: None, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = env.tree()
    assert main(["doctor"]) == 1
    assert env.tree() == before
    assert not env.state.exists()


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--help"]) == 0
    assert "--json" in capsys.readouterr().out
    assert main(["doctor", "--bogus"]) == 2
