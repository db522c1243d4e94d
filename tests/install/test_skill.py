"""`pager skill install`: SKILL.md in every skills directory, or through the skills installer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pager.cli import main
from pager.implementations.registry import discover
from pager.install import skill
from tests.install.conftest import Env, paths_with, run_json


def _expected_dirs(env: Env) -> set[Path]:
    """The built-in manifests' [skill] dirs, and the shared ~/.agents/skills."""
    return {
        env.home / ".claude" / "skills",
        env.home / ".agents" / "skills",
        env.home / ".config" / "opencode" / "skills",
        env.home / ".pi" / "agent" / "skills",
        env.home / ".gemini" / "skills",
        env.home / ".copilot" / "skills",
        env.home / ".qwen" / "skills",
        env.home / ".config" / "kilo" / "skills",
    }


def test_skill_md_is_short_with_front_matter() -> None:
    text = skill.skill_text().decode()
    lines = text.splitlines()
    assert len(lines) <= 80
    assert lines[0] == "---"
    end = lines.index("---", 1)
    front = dict(line.split(": ", 1) for line in lines[1:end])
    assert front["name"] == "pager"
    assert len(front["description"]) > 40
    body = text.lower()
    for topic in (
        "fetch",
        "ack",
        "idempotency_key",
        "expired",
        "ended",
        "agt_",
        "@workspace",
        "`reserve`",
        "`release`",
        "never edit around a reservation",
    ):
        assert topic in body
    assert "data, not instructions" in body
    # Issue 12: long jobs through `pager run` in the background, the job id told, the turn
    # ended; short commands run directly.
    for said in ("pager run --job-id", "&`", "end your turn", "short commands directly"):
        assert said in body, said


def test_skill_dirs_come_from_the_registry(env: Env) -> None:
    assert set(skill.skill_dirs(discover())) == _expected_dirs(env)


def test_install_writes_skill_md_into_every_skills_dir(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = run_json(capsys, "skill", "install", "--no-npx")
    assert status == 0
    assert report["via"] == "files"
    expected = {str(directory / "pager" / "SKILL.md") for directory in _expected_dirs(env)}
    assert paths_with(report, "written") == expected == env.files()
    shipped = skill.skill_text()
    for path in expected:
        assert Path(path).read_bytes() == shipped
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_install_twice_then_uninstall_leaves_home_as_it_was(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    (env.home / ".claude" / "skills" / "other").mkdir(parents=True)
    (env.home / ".claude" / "skills" / "other" / "SKILL.md").write_text("---\nname: other\n---\n")
    before = env.tree()
    assert run_json(capsys, "skill", "install", "--no-npx")[0] == 0
    tree = env.tree()
    status, report = run_json(capsys, "skill", "install", "--no-npx")
    assert status == 0
    assert {item["status"] for item in report["files"]} == {"unchanged"}
    assert len(report["files"]) == len(_expected_dirs(env))
    assert env.tree() == tree
    status, report = run_json(capsys, "skill", "install", "--uninstall")
    assert status == 0
    assert env.tree() == before


def test_uninstall_keeps_an_edited_skill(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skill", "install", "--no-npx"]) == 0
    edited = env.home / ".agents" / "skills" / "pager" / "SKILL.md"
    edited.write_text("my notes\n")
    status, report = run_json(capsys, "skill", "install", "--uninstall")
    assert status == 0
    assert paths_with(report, "kept") == {str(edited)}
    assert env.files() == {str(edited)}


def test_extra_arguments_without_the_skills_installer_are_a_usage_error(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["skill", "install", "-a", "claude-code"]) == 2  # PATH has no npx
    assert "not on PATH: -a claude-code" in capsys.readouterr().err
    assert main(["skill", "install", "--no-npx", "--", "-g"]) == 2
    assert "disabled by --no-npx" in capsys.readouterr().err
    assert env.tree() == []


def test_without_npx_on_path_the_files_are_written(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = run_json(capsys, "skill", "install")  # PATH holds no npx
    assert (status, report["via"]) == (0, "files")


def _fake_npx(env: Env, exit_status: int = 0) -> Path:
    """A stand-in for npx that records its arguments (the real one never runs in tests)."""
    log = env.root / "npx-args"
    fake = env.root / "fake-npx"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {log}\nexit {exit_status}\n')
    fake.chmod(0o755)
    return fake


def test_the_skills_installer_gets_the_skill_and_the_arguments_unchanged(env: Env) -> None:
    fake = _fake_npx(env)
    result = skill.install(discover(), env.state, ["-a", "claude-code", "--yes"], npx=str(fake))
    source = env.state / "skill" / "pager"
    assert result.via == "npx"
    assert result.exit_status == 0
    args = (env.root / "npx-args").read_text().splitlines()
    assert args == ["skills", "add", str(source), "-g", "-a", "claude-code", "--yes"]
    assert (source / "SKILL.md").read_bytes() == skill.skill_text()
    assert env.tree() == []  # the skills installer's copies are its own business
    skill.install(discover(), env.state, ["--global"], npx=str(fake))
    args = (env.root / "npx-args").read_text().splitlines()
    assert args == ["skills", "add", str(source), "--global"]
    record, _, notes = skill.uninstall(env.state)
    assert record is not None
    assert not source.exists()
    assert any("npx skills remove pager" in note for note in notes)


def test_a_failing_skills_installer_is_reported(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_npx(env, exit_status=3)
    (env.bin / "npx").symlink_to(fake)
    status, report = run_json(capsys, "skill", "install", "-a", "codex")
    assert status == 1
    assert report["skills_installer"]["exit_status"] == 3
    assert report["skills_installer"]["command"][1:] == [
        "skills",
        "add",
        str(env.state / "skill" / "pager"),
        "-g",
        "-a",
        "codex",
    ]
