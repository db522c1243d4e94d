"""Qwen Code's connector (pager/implementations/connectors/qwen.py): the per-launch QWEN_HOME
and its extension, for an interactive launch and a wake run, and the built-in `[wake.launch]`.
Checked against the real Qwen Code by scripts/verify_harnesses.py --only qwen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pager.implementations.launching import launch_spec
from pager.launch.wrapper import harness_command
from tests.implementations.test_headless_connectors import KEY, PROMPT, manifest, prepare, values


def extension(config_dir: str) -> Path:
    return Path(config_dir) / "extensions" / "pager-launch"


def hooks(config_dir: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((extension(config_dir) / "hooks" / "hooks.json").read_text())
    hooks: dict[str, Any] = found["hooks"]
    return hooks


def test_qwen_headless_run_is_wired_as_any_launch(tmp_path: Path) -> None:
    """Qwen Code keeps SessionStart's context apart from the prompt, so a wake run keeps both
    hooks (UserPromptSubmit still sees the wake prompt's `[pager]`) and the same server."""
    interactive = prepare("qwen", tmp_path / "a", headless=False)["config_dir"]
    headless = prepare("qwen", tmp_path / "b", headless=True)["config_dir"]
    assert sorted(hooks(interactive)) == ["PreToolUse", "SessionStart", "UserPromptSubmit"]
    state = {"a": str(tmp_path / "a" / "state"), "b": str(tmp_path / "b" / "state")}
    same = json.dumps(hooks(headless)).replace(state["b"], state["a"])
    assert json.loads(same) == hooks(interactive)  # the same, in its own state directory
    for config_dir in (interactive, headless):
        config = json.loads((extension(config_dir) / "qwen-extension.json").read_text())
        assert config["mcpServers"]["pager"] == {
            "httpUrl": "http://127.0.0.1:4555/mcp",
            "headers": {"Authorization": "Bearer prl_test"},
        }


def test_qwen_home_is_the_users_qwen_directory_or_their_qwen_home(tmp_path: Path) -> None:
    """QWEN_HOME names the `.qwen` directory itself: the launch links `~/.qwen`'s entries, or
    those of the QWEN_HOME the user (or an enclosing launch) set."""
    config_dir = prepare("qwen", tmp_path / "a", headless=False)["config_dir"]
    own = tmp_path / "a" / "home" / ".qwen"
    assert Path(config_dir, "settings.json").readlink() == own / "settings.json"
    assert (own / "projects").is_dir()


def test_qwen_wake_launch_resumes_headless(tmp_path: Path) -> None:
    found = manifest("qwen")
    assert found.wake.launch is not None
    directory = tmp_path / "launch"
    directory.mkdir()
    command = harness_command(
        launch_spec(found),
        "/bin/qwen",
        (),
        values(directory),
        str(directory),
        {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin"},
        headless=True,
        templates=found.wake.launch.args,
    )
    assert list(command.argv) == ["/bin/qwen", "--resume", KEY, "-p", PROMPT]
    assert command.env["QWEN_HOME"] == str(directory / "qwen-home")
