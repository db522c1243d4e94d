"""`pager setup`: finds the harnesses by their manifests' `[detect]`, shows (`--dry-run`) and
writes what sessions started without `pager` need, changes nothing the second time, and
`--undo` restores the home exactly, the user's own settings file included."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from pager.cli import main
from tests.install.conftest import (
    CLAUDE_PLUGIN,
    USER_SETTINGS,
    VENV_PAGER,
    Env,
    fake_harness,
    run_json,
)


def _files(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [*report["skill"]["files"], *(f for h in report["harnesses"] for f in h["files"])]


def _entries(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for harness in report["harnesses"] for entry in harness["entries"]]


def test_dry_run_lists_every_file_and_entry_and_writes_nothing(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = env.tree()
    status, report = run_json(capsys, "setup", "--dry-run")
    assert status == 0
    assert report["dry_run"] is True
    assert report["changed"] is True
    assert [harness["id"] for harness in report["harnesses"]] == ["claude"]
    assert any("claude on PATH" in why for why in report["harnesses"][0]["found"])
    planned = {item["path"] for item in _files(report)}
    plugin = env.home.joinpath(*CLAUDE_PLUGIN)
    assert str(plugin / "plugins" / "pager" / "hooks" / "hooks.json") in planned
    assert str(env.home / ".claude" / "skills" / "pager" / "SKILL.md") in planned
    assert {item["status"] for item in _files(report)} == {"written"}
    assert {(e["key"], e["status"]) for e in _entries(report)} == {
        ("extraKnownMarketplaces.pager-local", "added"),
        ("enabledPlugins.pager@pager-local", "added"),
    }
    assert env.tree() == before
    assert not env.state.exists()  # no state directory, no record

    text = main(["setup", "--dry-run"]), capsys.readouterr().out
    assert text[0] == 0
    assert "Dry run: nothing is written." in text[1]
    assert f"  write      ~/{'/'.join(CLAUDE_PLUGIN)}/plugins/pager/hooks/hooks.json" in text[1]
    assert "  add        ~/.claude/settings.json  enabledPlugins.pager@pager-local" in text[1]
    assert env.tree() == before


def test_setup_writes_the_plan_and_a_second_run_changes_nothing(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, planned = run_json(capsys, "setup", "--dry-run")
    status, report = run_json(capsys, "setup")
    assert status == 0
    assert report["changed"] is True
    assert {item["path"] for item in _files(report)} == {item["path"] for item in _files(planned)}
    written = {item["path"] for item in _files(report) if item["status"] == "written"}
    assert written == env.files() - {str(claude)}
    hooks = json.loads(
        env.home.joinpath(*CLAUDE_PLUGIN, "plugins", "pager", "hooks", "hooks.json").read_text()
    )
    for groups in hooks["hooks"].values():
        (line,) = (hook["command"] for group in groups for hook in group["hooks"])
        assert shlex.split(line)[0] == VENV_PAGER  # this Pager, by absolute path
    settings = json.loads(claude.read_text())
    assert settings["model"] == "opus"
    assert settings["enabledPlugins"] == {"theirs@market": False, "pager@pager-local": True}
    source = settings["extraKnownMarketplaces"]["pager-local"]["source"]
    assert source == {"source": "directory", "path": str(env.home.joinpath(*CLAUDE_PLUGIN))}

    after_first = env.tree()
    status, again = run_json(capsys, "setup")
    assert status == 0
    assert again["changed"] is False
    assert {item["status"] for item in _files(again)} == {"unchanged"}
    assert {entry["status"] for entry in _entries(again)} == {"unchanged"}
    assert env.tree() == after_first  # the same files with the same bytes
    assert main(["setup"]) == 0
    assert "Nothing changed: everything was already set up." in capsys.readouterr().out
    assert env.tree() == after_first


def test_undo_restores_the_home_exactly(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file and directory setup created is gone, and the user's settings file has its
    own bytes again (their formatting too), not a re-serialised copy."""
    fake_harness(env, "gemini")
    (env.home / ".gemini").mkdir()
    (env.home / ".gemini" / "settings.json").write_text("{}\n")
    before = env.tree()
    assert main(["setup"]) == 0
    assert env.tree() != before
    status, report = run_json(capsys, "setup", "--undo")
    assert status == 0
    assert report["found"] is True
    assert env.tree() == before
    assert claude.read_bytes() == USER_SETTINGS
    status, report = run_json(capsys, "setup", "--undo")
    assert (status, report["found"]) == (0, False)  # nothing left to undo


def test_undo_keeps_what_the_user_changed_since(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The settings file edited after setup: undo takes out only Pager's keys and keeps the
    user's edit; a plugin file the user changed is kept too."""
    assert main(["setup"]) == 0
    settings = json.loads(claude.read_text())
    settings["theme"] = "dark"
    claude.write_text(json.dumps(settings))
    mcp = env.home.joinpath(*CLAUDE_PLUGIN, "plugins", "pager", ".mcp.json")
    mcp.write_text('{"mcpServers": {}}\n')
    status, report = run_json(capsys, "setup", "--undo")
    assert status == 0
    assert json.loads(claude.read_text()) == {
        "model": "opus",
        "enabledPlugins": {"theirs@market": False},
        "theme": "dark",
    }
    assert mcp.read_text() == '{"mcpServers": {}}\n'
    assert {"path": str(mcp), "status": "kept", "kind": "file"}.items() <= next(
        item for item in report["files"] if item["path"] == str(mcp)
    ).items()


def test_undo_leaves_an_install_made_before_setup(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pager plugin install claude` ran first: its files are not setup's to remove."""
    assert main(["plugin", "install", "claude"]) == 0
    before = env.tree()
    assert main(["setup"]) == 0
    assert main(["setup", "--undo"]) == 0
    capsys.readouterr()
    assert env.tree() == before


def test_a_malformed_settings_file_is_reported_and_left_untouched(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = b'{"model": "opus",, \n'
    claude.write_bytes(broken)
    status, report = run_json(capsys, "setup")
    assert status == 1
    assert report["ok"] is False
    for entry in _entries(report):
        assert entry["status"] == "skipped"
        assert f"{claude} is not valid JSON" in entry["reason"]
        assert "fix it or move it aside" in entry["reason"]
    assert claude.read_bytes() == broken
    assert main(["setup", "--undo"]) == 0
    assert claude.read_bytes() == broken


def test_a_settings_file_that_is_a_link_is_not_replaced(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dotfiles manager links the settings file: writing it would replace the link with a
    copy (and undo could not give the link back), so setup reports it and writes neither."""
    dotfiles = env.root / "dotfiles-settings.json"
    dotfiles.write_bytes(USER_SETTINGS)
    claude.unlink()
    claude.symlink_to(dotfiles)
    status, report = run_json(capsys, "setup")
    assert status == 1
    for entry in _entries(report):
        assert entry["status"] == "skipped"
        assert "is a symbolic link" in entry["reason"]
    assert claude.is_symlink()
    assert dotfiles.read_bytes() == USER_SETTINGS


def test_a_key_the_user_set_is_theirs(
    env: Env, claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user disabled Pager's plugin themselves: setup does not turn it back on, and undo
    does not remove their choice."""
    mine = b'{"enabledPlugins": {"pager@pager-local": false}}\n'
    claude.write_bytes(mine)
    status, report = run_json(capsys, "setup")
    assert status == 1
    refused = {e["key"]: e for e in _entries(report)}["enabledPlugins.pager@pager-local"]
    assert refused["status"] == "skipped"
    assert "your own value" in refused["reason"]
    assert main(["setup", "--undo"]) == 0
    assert claude.read_bytes() == mine


def test_detection_comes_from_the_manifests(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """No harness: nothing written. A user manifest's `[detect]` makes its harness found."""
    before = env.tree()
    assert main(["setup"]) == 0
    assert "No harness found here" in capsys.readouterr().out
    assert env.tree() == before
    manifests = env.home / ".config" / "pager" / "implementations"
    manifests.mkdir(parents=True)
    (manifests / "aider.toml").write_text(
        'id = "aider"\nname = "Aider"\nexecutable = "aider"\n'
        '[detect]\nexecutables = ["aider"]\npaths = ["~/.aider.conf.yml"]\n'
    )
    (env.home / ".aider.conf.yml").write_text("")
    status, report = run_json(capsys, "setup", "--dry-run")
    assert status == 0
    (harness,) = report["harnesses"]
    assert (harness["id"], harness["found"]) == ("aider", ["~/.aider.conf.yml"])
    assert harness["notes"] == [
        "nothing to install: its sessions join when started with `pager aider`"
    ]


@pytest.mark.parametrize("found", ["program", "settings"])
def test_kilo_is_found_and_gets_the_plugin_it_loads(
    env: Env, capsys: pytest.CaptureFixture[str], found: str
) -> None:
    """Kilo CLI is found by its program or by the configuration file it writes on its first
    start; setup writes the plugin where Kilo loads plugins from, and `--undo` takes it back."""
    if found == "program":
        fake_harness(env, "kilo")
    else:
        (env.home / ".config" / "kilo").mkdir(parents=True)
        (env.home / ".config" / "kilo" / "kilo.jsonc").write_text('{"$schema": "x"}\n')
    mine = env.tree()
    status, report = run_json(capsys, "setup")
    assert status == 0
    (harness,) = report["harnesses"]
    assert harness["id"] == "kilo"
    plugin = env.home / ".config" / "kilo" / "plugins" / "pager.js"
    assert [item["path"] for item in harness["files"]] == [str(plugin)]
    assert '"--implementation", "kilo"' in plugin.read_text()
    assert (env.home / ".config" / "kilo" / "skills" / "pager" / "SKILL.md").exists()
    assert main(["setup", "--undo"]) == 0
    assert env.tree() == mine  # the user's own kilo.jsonc untouched


def test_only_names_harnesses_even_when_not_found(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = run_json(capsys, "setup", "--dry-run", "--only", "gemini")
    assert status == 0
    assert [(h["id"], h["found"]) for h in report["harnesses"]] == [("gemini", [])]
    assert main(["setup", "--only", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "no implementation 'nosuch'" in err
    assert "claude" in err
    assert main(["setup", "--undo", "--dry-run"]) == 2
    assert main(["setup", "--only", ","]) == 2


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--dry-run" in out
    assert "--undo" in out
    assert "--only" in out
    assert main(["help", "setup"]) == 0
    assert "--undo" in capsys.readouterr().out
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert "setup" in listing
    assert "doctor" in listing


def test_copilot_setup_adds_the_mcp_server_and_undo_keeps_the_users_servers(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """GitHub Copilot CLI found: the hooks file, and `mcpServers.pager` (stdio `pager mcp`)
    added to the user's own ~/.copilot/mcp-config.json beside their servers; `--undo` gives
    the file back byte for byte."""
    fake_harness(env, "copilot")
    config = env.home / ".copilot" / "mcp-config.json"
    config.parent.mkdir()
    own = b'{\n  "mcpServers": {\n    "theirs": {"type": "http", "url": "https://x.test"}\n  }\n}\n'
    config.write_bytes(own)
    before = env.tree()
    status, report = run_json(capsys, "setup", "--only", "copilot")
    assert status == 0
    assert {(e["key"], e["status"]) for e in _entries(report)} == {("mcpServers.pager", "added")}
    servers = json.loads(config.read_text())["mcpServers"]
    assert servers["theirs"] == {"type": "http", "url": "https://x.test"}
    assert servers["pager"] == {
        "type": "local",
        "command": VENV_PAGER,
        "args": [
            "mcp",
            "--implementation",
            "copilot",
            "--conversation-key-env",
            "COPILOT_AGENT_SESSION_ID",
        ],
        "tools": ["*"],
    }
    assert (env.home / ".copilot" / "hooks" / "pager.json").is_file()
    assert main(["setup", "--undo"]) == 0
    assert config.read_bytes() == own
    assert env.tree() == before


def test_setup_installs_the_git_guard_and_undo_removes_it(
    env: Env, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run inside a repository, setup installs the git guard's pre-commit hook (once), and
    --undo removes it; a pre-commit hook of the user's is left alone, with the line to add."""
    import shutil
    import subprocess

    git = shutil.which("git", path="/usr/bin:/bin:/usr/local/bin")
    assert git is not None
    (env.bin / "git").symlink_to(git)
    fake_harness(env, "gemini")
    repo = tmp_path / "repo"
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    monkeypatch.chdir(repo)
    hook = repo / ".git" / "hooks" / "pre-commit"
    status, report = run_json(capsys, "setup")
    assert status == 0
    assert report["git_guard"]["files"] == [
        {"path": str(hook), "status": "written", "kind": "file"}
    ]
    assert "hook --git-pre-commit" in hook.read_text()
    status, report = run_json(capsys, "setup")
    assert report["git_guard"]["files"][0]["status"] == "unchanged"
    status, report = run_json(capsys, "setup", "--undo")
    assert status == 0
    assert not hook.exists()

    hook.write_text("#!/bin/sh\nmake lint\n")
    status, report = run_json(capsys, "setup")
    assert status == 1  # left alone: said, not hidden
    (skipped,) = report["git_guard"]["files"]
    assert skipped["status"] == "skipped"
    assert "hook --git-pre-commit || exit 1" in skipped["reason"]
    assert hook.read_text() == "#!/bin/sh\nmake lint\n"


def test_gemini_setup_enables_hooks_in_its_settings_and_undo_gives_the_file_back(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gemini CLI runs an extension's hooks only where its settings enable hooks: setup adds
    `hooksConfig.enabled` beside the user's keys (dry run: shown, not written), a second run
    changes nothing, and `--undo` gives the file back byte for byte; a value the user chose
    is theirs (reported, never flipped, never removed)."""
    fake_harness(env, "gemini")
    settings = env.home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    own = b'{\n  "theme": "GitHub",\n  "hooksConfig": {"notifications": true}\n}\n'
    settings.write_bytes(own)
    before = env.tree()
    status, planned = run_json(capsys, "setup", "--dry-run", "--only", "gemini")
    assert (status, _entries(planned)) == (
        0,
        [{"path": str(settings), "key": "hooksConfig.enabled", "status": "added"}],
    )
    assert env.tree() == before
    status, report = run_json(capsys, "setup", "--only", "gemini")
    assert status == 0
    assert json.loads(settings.read_text()) == {
        "theme": "GitHub",
        "hooksConfig": {"notifications": True, "enabled": True},
    }
    assert (env.home / ".gemini" / "extensions" / "pager" / "hooks" / "hooks.json").is_file()
    after = env.tree()
    status, again = run_json(capsys, "setup", "--only", "gemini")
    assert [e["status"] for e in _entries(again)] == ["unchanged"]
    assert env.tree() == after
    assert main(["setup", "--undo"]) == 0
    assert settings.read_bytes() == own
    assert env.tree() == before

    theirs = b'{"hooksConfig": {"enabled": false}}\n'
    settings.write_bytes(theirs)
    status, report = run_json(capsys, "setup", "--only", "gemini")
    assert status == 1
    (refused,) = _entries(report)
    assert (refused["status"], "your own value" in refused["reason"]) == ("skipped", True)
    assert main(["setup", "--undo"]) == 0
    assert settings.read_bytes() == theirs


def _recording_codex(env: Env, *, fails: str = "") -> Path:
    """A `codex` on PATH that appends each argv to a log (and fails for `fails`), standing in
    for Codex's own plugin commands; the real Codex 0.171.0 runs the same commands
    (docs/skill-and-plugins.md)."""
    log = env.root / "codex.log"
    program = env.bin / "codex"
    program.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        f'case "$*" in "{fails}") echo "it went wrong" >&2; exit 3;; esac\n'
        'echo "done: $*"\n'
    )
    program.chmod(0o755)
    return log


def test_codex_setup_registers_the_plugin_with_codex_and_undo_takes_it_back(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Codex enables a plugin only through its own commands: setup runs `codex plugin
    marketplace add` and `codex plugin add` after writing the marketplace (a dry run names
    them and runs nothing), a second setup runs nothing, `--undo` runs `codex plugin remove`
    and `codex plugin marketplace remove`; trusting the hooks stays the user's step."""
    log = _recording_codex(env)
    root = env.home / ".codex" / "plugins" / "pager"
    status, planned = run_json(capsys, "setup", "--dry-run", "--only", "codex")
    (harness,) = planned["harnesses"]
    assert status == 0
    assert [ran["argv"] for ran in harness["ran"]] == [
        ["codex", "plugin", "marketplace", "add", str(root)],
        ["codex", "plugin", "add", "pager@pager-local"],
    ]
    assert not log.exists()

    status, report = run_json(capsys, "setup", "--only", "codex")
    (harness,) = report["harnesses"]
    assert (status, [ran["ok"] for ran in harness["ran"]]) == (0, [True, True])
    assert log.read_text().splitlines() == [
        f"plugin marketplace add {root}",
        "plugin add pager@pager-local",
    ]
    assert any("/hooks" in step for step in harness["next_steps"])
    assert not any("marketplace add" in step for step in harness["next_steps"])

    status, again = run_json(capsys, "setup", "--only", "codex")
    assert (status, again["harnesses"][0]["ran"], again["changed"]) == (0, [], False)
    assert len(log.read_text().splitlines()) == 2

    assert main(["setup", "--undo"]) == 0
    assert "ran        codex plugin remove pager@pager-local" in capsys.readouterr().out
    assert log.read_text().splitlines()[2:] == [
        "plugin remove pager@pager-local",
        "plugin marketplace remove pager-local",
    ]
    assert not root.exists()


def test_codex_setup_says_what_failed_and_leaves_the_steps_to_do_by_hand(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Codex refusing its plugin add: setup stops there, names the command and what Codex
    said, prints the manual steps, exits 1, and records nothing for --undo to run."""
    log = _recording_codex(env, fails="plugin add pager@pager-local")
    status, report = run_json(capsys, "setup", "--only", "codex")
    (harness,) = report["harnesses"]
    assert status == 1
    assert [ran["ok"] for ran in harness["ran"]] == [True, False]
    assert "codex plugin add pager@pager-local" in harness["problem"]
    assert "it went wrong" in harness["problem"]
    assert any("codex plugin marketplace add" in step for step in harness["next_steps"])
    assert main(["setup", "--undo"]) == 0
    assert not [line for line in log.read_text().splitlines() if "remove" in line]


def test_codex_named_but_not_on_path_gets_its_files_and_the_steps(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--only codex` on a machine without `codex`: the marketplace is written, nothing is
    run, and the registration is printed as the steps to run once Codex is installed."""
    status, report = run_json(capsys, "setup", "--only", "codex")
    (harness,) = report["harnesses"]
    assert (status, harness["ran"], harness["problem"]) == (0, [], "")
    assert any("not on PATH" in note for note in harness["notes"])
    assert any("codex plugin marketplace add" in step for step in harness["next_steps"])
