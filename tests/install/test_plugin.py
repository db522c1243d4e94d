"""`pager plugin install [HARNESS]`: exact files, idempotent, clean `--uninstall`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from pager.cli import main
from pager.install import files
from tests.install.conftest import VENV_PAGER, Env, paths_with, run_json

CLAUDE_EVENTS = ("SessionStart", "UserPromptSubmit")


def _load(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def _hook_commands(hooks_file: Path) -> dict[str, list[str]]:
    data = _load(hooks_file)
    return {
        event: [hook["command"] for group in groups for hook in group["hooks"]]
        for event, groups in data["hooks"].items()
    }


def test_claude_writes_exactly_the_files_it_reports(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = run_json(capsys, "plugin", "install", "claude")
    assert status == 0
    written = paths_with(report, "written")
    assert written == env.files()
    assert {item["status"] for item in report["files"]} == {"written"}
    root = env.home / ".claude" / "plugins" / "pager"
    plugin = root / "plugins" / "pager"
    assert written == {
        str(root / ".claude-plugin" / "marketplace.json"),
        str(plugin / ".claude-plugin" / "plugin.json"),
        str(plugin / "hooks" / "hooks.json"),
        str(plugin / ".mcp.json"),
    }
    assert report["location"] == str(root)
    assert any("claude plugin install pager@pager-local" in step for step in report["next_steps"])


def test_claude_files_parse_and_run_the_venvs_pager(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "install", "claude"]) == 0
    capsys.readouterr()
    root = env.home / ".claude" / "plugins" / "pager"
    plugin = root / "plugins" / "pager"
    marketplace = _load(root / ".claude-plugin" / "marketplace.json")
    (entry,) = marketplace["plugins"]
    assert entry["name"] == "pager"
    assert (root / entry["source"]).resolve() == plugin.resolve()
    assert _load(plugin / ".claude-plugin" / "plugin.json")["name"] == "pager"
    commands = _hook_commands(plugin / "hooks" / "hooks.json")
    assert sorted(commands) == sorted([*CLAUDE_EVENTS, "PreToolUse"])
    (check,) = commands["PreToolUse"]  # the reservations check before each tool call
    assert shlex.split(check)[1:5] == ["hook", "--implementation", "claude", "--pre-tool"]
    assert shlex.split(check)[-1] == "PreToolUse"
    for event in CLAUDE_EVENTS:
        (line,) = commands[event]
        argv = shlex.split(line)
        assert Path(argv[0]).is_absolute()
        assert argv == [
            VENV_PAGER,
            *("hook", "--implementation", "claude", "--format", "claude"),
            *("--max-chars", "9000", event),
        ]
    assert _load(plugin / ".mcp.json") == {
        "mcpServers": {
            "pager": {"command": VENV_PAGER, "args": ["mcp", "--implementation", "claude"]}
        }
    }


def test_claude_twice_is_unchanged_without_duplicates(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    first_status, first = run_json(capsys, "plugin", "install", "claude")
    tree = env.tree()
    second_status, second = run_json(capsys, "plugin", "install", "claude")
    assert (first_status, second_status) == (0, 0)
    assert env.tree() == tree
    paths = [item["path"] for item in second["files"]]
    assert len(paths) == len(set(paths))
    assert set(paths) == paths_with(first, "written")
    assert {item["status"] for item in second["files"]} == {"unchanged"}
    hooks = (
        env.home / ".claude" / "plugins" / "pager" / "plugins" / "pager" / "hooks" / "hooks.json"
    )
    assert all(len(lines) == 1 for lines in _hook_commands(hooks).values())


def test_claude_text_report_lists_each_file_once_per_line(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "install", "claude"]) == 0
    out = capsys.readouterr().out
    for path in env.files():
        assert [line.split() for line in out.splitlines() if path in line] == [["written", path]]
    assert main(["plugin", "install", "claude"]) == 0
    again = capsys.readouterr().out
    assert "Already installed; nothing changed." in again
    assert "written" not in again


def test_uninstall_removes_everything_and_nothing_else(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    (env.home / ".claude").mkdir()
    (env.home / ".claude" / "settings.json").write_text('{"theme": "dark"}\n')
    before = env.tree()
    assert main(["plugin", "install", "claude"]) == 0
    assert main(["plugin", "install", "claude"]) == 0
    status, report = run_json(capsys, "plugin", "install", "claude", "--uninstall")
    assert status == 0
    assert env.tree() == before
    removed = {item["path"] for item in report["files"] if item["kind"] == "file"}
    assert {item["status"] for item in report["files"]} == {"removed"}
    assert len(removed) == 4
    assert not files.record_path(env.state, "plugin-claude").exists()
    status, report = run_json(capsys, "plugin", "install", "claude", "--uninstall")
    assert (status, report["installed"], report["files"]) == (0, False, [])


def test_uninstall_keeps_a_file_changed_since(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugin", "install", "claude"]) == 0
    mcp = env.home / ".claude" / "plugins" / "pager" / "plugins" / "pager" / ".mcp.json"
    mcp.write_text('{"mcpServers": {}}\n')
    status, report = run_json(capsys, "plugin", "install", "claude", "--uninstall")
    assert status == 0
    by_path = {item["path"]: item for item in report["files"]}
    assert by_path[str(mcp)]["status"] == "kept"
    assert mcp.read_text() == '{"mcpServers": {}}\n'
    assert env.files() == {str(mcp)}
    # Only the directories that still hold it remain.
    assert {str(path) for path in env.home.rglob("*") if path.is_dir()} == {
        str(parent) for parent in mcp.parents if env.home in parent.parents
    }


def test_a_file_that_is_not_pagers_is_left_alone_unless_forced(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp = env.home / ".claude" / "plugins" / "pager" / "plugins" / "pager" / ".mcp.json"
    mcp.parent.mkdir(parents=True)
    mcp.write_text("mine\n")
    status, report = run_json(capsys, "plugin", "install", "claude")
    assert status == 1
    assert paths_with(report, "skipped") == {str(mcp)}
    assert mcp.read_text() == "mine\n"
    status, report = run_json(capsys, "plugin", "install", "claude", "--force")
    assert status == 0
    assert paths_with(report, "updated") == {str(mcp)}
    assert _load(mcp)["mcpServers"]["pager"]["command"] == VENV_PAGER


def test_a_later_install_updates_pagers_own_older_file(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "install", "claude"]) == 0
    plugin_json = env.home / ".claude" / "plugins" / "pager" / "plugins" / "pager"
    plugin_json = plugin_json / ".claude-plugin" / "plugin.json"
    record = files.load_record(env.state, "plugin-claude")
    assert record is not None
    old = b'{"name": "pager", "version": "0.0.1"}\n'
    plugin_json.write_bytes(old)  # as an older Pager would have written it
    record.files[str(plugin_json)] = files.digest(old)
    files.save_record(env.state, record)
    status, report = run_json(capsys, "plugin", "install", "claude")
    assert status == 0
    assert paths_with(report, "updated") == {str(plugin_json)}


def test_no_harness_is_a_usage_error_listing_those_with_a_plugin(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "install"]) == 2
    err = capsys.readouterr().err
    for ident in ("claude", "codex", "copilot", "gemini", "opencode", "pi", "qwen"):
        assert f"  {ident} " in err
    assert "shell" not in err
    assert env.tree() == []


def test_unknown_harness_names_the_known_ones(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugin", "install", "nosuch"]) == 1
    err = capsys.readouterr().err
    assert "nosuch" in err
    assert "known: claude, cline, codex, copilot, gemini, kilo, opencode, pi, qwen, shell" in err
    assert main(["plugin", "install", "nosuch", "--uninstall"]) == 1
    assert env.tree() == []


@pytest.mark.parametrize(
    ("ident", "message"),
    [("shell", "shell offers no plugin"), ("pi", "pi: not yet")],
)
def test_harnesses_without_an_installable_plugin_say_so(
    env: Env, capsys: pytest.CaptureFixture[str], ident: str, message: str
) -> None:
    assert main(["plugin", "install", ident]) == 1
    assert message in capsys.readouterr().err
    assert env.tree() == []


@pytest.mark.parametrize(
    ("ident", "events", "expected"),
    [
        (
            "codex",
            ("SessionStart", "UserPromptSubmit", "PreToolUse"),
            {
                ".codex/plugins/pager/.agents/plugins/marketplace.json",
                ".codex/plugins/pager/plugins/pager/.codex-plugin/plugin.json",
                ".codex/plugins/pager/plugins/pager/hooks/hooks.json",
                ".codex/plugins/pager/plugins/pager/.mcp.json",
            },
        ),
        (
            "gemini",
            ("SessionStart", "BeforeAgent", "BeforeTool"),
            {
                ".gemini/extensions/pager/gemini-extension.json",
                ".gemini/extensions/pager/hooks/hooks.json",
            },
        ),
        ("opencode", (), {".config/opencode/plugins/pager.js"}),
        ("kilo", (), {".config/kilo/plugins/pager.js"}),
    ],
)
def test_other_harnesses_install_idempotently_and_uninstall_cleanly(
    env: Env,
    capsys: pytest.CaptureFixture[str],
    ident: str,
    events: tuple[str, ...],
    expected: set[str],
) -> None:
    status, report = run_json(capsys, "plugin", "install", ident)
    assert status == 0
    assert paths_with(report, "written") == env.files() == {str(env.home / p) for p in expected}
    tree = env.tree()
    status, report = run_json(capsys, "plugin", "install", ident)
    assert status == 0
    assert {item["status"] for item in report["files"]} == {"unchanged"}
    assert env.tree() == tree
    assert any(VENV_PAGER in Path(path).read_text() for path in env.files())
    for path in env.files():
        text = Path(path).read_text()
        if path.endswith(".json"):
            data = json.loads(text)
            if path.endswith("hooks.json"):
                commands = _hook_commands(Path(path))
                assert sorted(commands) == sorted(events)
                for event, (line,) in commands.items():
                    assert shlex.split(line)[:4] == [VENV_PAGER, "hook", "--implementation", ident]
                    assert shlex.split(line)[-1] == event
            servers = data.get("mcpServers")
            if isinstance(servers, dict):
                assert servers["pager"] == {
                    "command": VENV_PAGER,
                    "args": ["mcp", "--implementation", ident],
                }
    status, _ = run_json(capsys, "plugin", "install", ident, "--uninstall")
    assert status == 0
    assert env.tree() == []


def test_copilot_hooks_file_and_the_mcp_server_it_asks_for(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hooks file of Pager's own in ~/.copilot/hooks (Copilot CLI's layout: `bash` commands,
    its camelCase events), idempotent and removed on uninstall; the user's mcp-config.json is
    not written by `plugin install`, which prints the `copilot mcp add` command instead."""
    status, report = run_json(capsys, "plugin", "install", "copilot")
    assert status == 0
    hooks_file = env.home / ".copilot" / "hooks" / "pager.json"
    assert paths_with(report, "written") == env.files() == {str(hooks_file)}
    data = json.loads(hooks_file.read_text())
    assert data["version"] == 1
    assert sorted(data["hooks"]) == ["preToolUse", "sessionStart", "userPromptSubmitted"]
    (check,) = data["hooks"].pop("preToolUse")  # the reservations check before each tool call
    assert shlex.split(check["bash"])[1:5] == ["hook", "--implementation", "copilot", "--pre-tool"]
    for event, (entry,) in data["hooks"].items():
        assert entry["type"] == "command"
        assert shlex.split(entry["bash"]) == [VENV_PAGER, "hook", "--implementation", "copilot",
            "--format", "copilot", "--max-chars", "9000", event]  # fmt: skip
    add = (
        f"copilot mcp add pager -- {VENV_PAGER} mcp --implementation copilot"
        " --conversation-key-env COPILOT_AGENT_SESSION_ID"
    )
    assert any(add in step for step in report["next_steps"])
    tree = env.tree()
    status, report = run_json(capsys, "plugin", "install", "copilot")
    assert {item["status"] for item in report["files"]} == {"unchanged"}
    assert env.tree() == tree
    status, _ = run_json(capsys, "plugin", "install", "copilot", "--uninstall")
    assert status == 0
    assert env.tree() == []


@pytest.mark.parametrize(("ident", "name"), [("opencode", "OpenCode"), ("kilo", "Kilo CLI")])
def test_opencode_plugin_wires_mcp_and_noreply_delivery(
    env: Env, capsys: pytest.CaptureFixture[str], ident: str, name: str
) -> None:
    """OpenCode's plugin file; Kilo CLI, an OpenCode fork, gets the same in its own directory."""
    assert main(["plugin", "install", ident]) == 0
    capsys.readouterr()
    text = (env.home / ".config" / ident / "plugins" / "pager.js").read_text()
    assert f"const PAGER = {json.dumps([VENV_PAGER])};" in text
    assert "export const PagerPlugin" in text
    assert "noReply: true" in text
    assert "process.env.PAGER_TOKEN" in text
    assert f'"--implementation", "{ident}", "--format", "text"' in text
    assert f"// Pager plugin for {name}, written by `pager plugin install {ident}`" in text
    assert "@" + "ID@" not in text
    assert "@" + "NAME@" not in text


def test_pager_python_runs_the_entry_point_with_that_interpreter(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGER_PYTHON", sys.executable)
    assert main(["plugin", "install", "claude"]) == 0
    capsys.readouterr()
    plugin = env.home / ".claude" / "plugins" / "pager" / "plugins" / "pager"
    server = _load(plugin / ".mcp.json")["mcpServers"]["pager"]
    assert server == {
        "command": sys.executable,
        "args": [VENV_PAGER, "mcp", "--implementation", "claude"],
    }
    for (line,) in _hook_commands(plugin / "hooks" / "hooks.json").values():
        assert shlex.split(line)[:3] == [sys.executable, VENV_PAGER, "hook"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PAGER_PYTHON", "relative/python"),
        ("PAGER_PYTHON", "/nonexistent/python3"),
        ("PAGER_PYTHON", "/bin/sh"),  # runs, but cannot import Pager
        ("PAGER_PACKAGE_ROOT", "/nonexistent/pager-root"),
    ],
)
def test_an_invalid_host_interpreter_setting_is_refused(
    env: Env,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["plugin", "install", "claude"]) == 1
    assert f"{variable}={value}" in capsys.readouterr().err
    assert env.tree() == []


def test_pager_package_root_names_the_entry_point_through_it(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stable = env.root / "pager-current"
    stable.symlink_to(Path(sys.executable).parent.parent)  # like an installer's `current` link
    monkeypatch.setenv("PAGER_PACKAGE_ROOT", str(stable))
    assert main(["plugin", "install", "gemini"]) == 0
    capsys.readouterr()
    extension = _load(env.home / ".gemini" / "extensions" / "pager" / "gemini-extension.json")
    assert extension["mcpServers"]["pager"]["command"] == str(stable / "bin" / "pager")
