"""The `m` menu's choices and results: `pager skill install` / `pager plugin install HARNESS`
run as subprocesses with --json, their reports turned into lines."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pager.tui.installs import InstallChoice, InstallResult, describe, install_choices, run_install


def test_install_choices_list_the_skill_and_every_plugin_harness() -> None:
    """The registry's plugin harnesses (claude, codex, …) each get a `plugin install` entry."""
    choices = install_choices()
    assert choices[0].key == "skill"
    plugins = {c.key: c for c in choices if c.key.startswith("plugin-")}
    assert {"plugin-claude", "plugin-codex", "plugin-gemini", "plugin-opencode"} <= set(plugins)
    assert plugins["plugin-claude"].args == ("plugin", "install", "claude", "--json")
    assert plugins["plugin-claude"].command == "pager plugin install claude --json"


def test_run_install_reports_the_files_a_plugin_install_wrote(tmp_path: Path) -> None:
    """A real `pager plugin install claude --json` in a private HOME: exit 0, files listed."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAGER_")}
    env.update(HOME=str(home), PAGER_HOME=str(tmp_path / "state"), PATH=str(tmp_path))
    env.pop("XDG_CONFIG_HOME", None)
    choice = InstallChoice(
        "plugin-claude", "Claude Code plugin", ("plugin", "install", "claude", "--json")
    )
    result = run_install(choice, pager=(sys.executable, "-m", "pager"), env=env)
    assert result.ok, result.output
    assert result.report is not None
    written = [item["path"] for item in result.report["files"] if item["status"] == "written"]
    assert written
    assert all(path.startswith(str(home)) for path in written)
    assert result.lines[0] == "pager plugin install claude --json: done"
    assert any(written[0] in line for line in result.lines)


def test_run_install_failure_keeps_the_error_message(tmp_path: Path) -> None:
    """An unknown harness: exit status 1 and the command's own error line."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAGER_")}
    env.update(HOME=str(tmp_path), PAGER_HOME=str(tmp_path / "state"))
    choice = InstallChoice("plugin-x", "x", ("plugin", "install", "no-such-harness", "--json"))
    result = run_install(choice, env=env)
    assert not result.ok
    assert "failed (exit status 1)" in result.lines[0]
    assert "no-such-harness" in result.output


def test_describe_reads_a_report_printed_after_the_skills_installers_output() -> None:
    """npx's own output comes first on stdout; the JSON report is the last object."""
    from pager.tui.installs import _split_report

    report, rest = _split_report('npx says hi\n{"files": [], "notes": ["n1"]}\n')
    assert report == {"files": [], "notes": ["n1"]}
    assert rest == "npx says hi\n"
    choice = InstallChoice("skill", "Pager skill", ("skill", "install", "--json"))
    lines = describe(InstallResult(choice, 0, {
        "files": [{"path": "/h/.agents/skills/pager/SKILL.md", "status": "unchanged"}],
        "skills_installer": {"command": ["npx", "skills", "add"], "exit_status": 0},
        "next_steps": ["restart the harness"],
    }, ""))  # fmt: skip
    assert lines == [
        "pager skill install --json: done",
        "files:",
        "  unchanged  /h/.agents/skills/pager/SKILL.md",
        "ran: npx skills add (exit status 0)",
        "still to do by hand:",
        "  restart the harness",
    ]
