"""`[wake.launch]` (docs/wake.md): how a manifest declares its headless resume, whether an
identity can be woken by a launch (`why_not`), and the command a run gets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pager.implementations import Manifest, ManifestInvalid, Source, SourceKind, parse_text
from pager.implementations.launching import launch_spec
from pager.launch.wake_command import wake_command, wake_values, why_not
from pager.launch.wake_prompt import wake_prompt

SOURCE = Source(SourceKind.USER, "/cfg/implementations/x.toml", "x.toml")
BASE = 'id = "mine"\nname = "Mine"\nexecutable = "mine"\n'
RESUME = '[wake.launch]\nargs = ["-p", "--resume", "{conversation_key}", "{prompt}"]\n'


def parse(text: str) -> Manifest:
    return parse_text(text, SOURCE)


def test_wake_launch_is_read_with_its_templates() -> None:
    manifest = parse(BASE + RESUME)
    assert manifest.wake.launch is not None
    assert manifest.wake.launch.args == ("-p", "--resume", "{conversation_key}", "{prompt}")
    assert manifest.to_json()["wake"]["launch"] == {"args": list(manifest.wake.launch.args)}
    assert parse(BASE).wake.launch is None


@pytest.mark.parametrize(
    ("section", "key", "needle"),
    [
        ("[wake.launch]\nargs = []\n", "wake.launch.args", "got none"),
        ('[wake.launch]\nargs = ["{nope}"]\n', "wake.launch.args[0]", "unknown placeholder"),
        ('[wake]\nlaunch = "claude -p"\n', "wake.launch", "expected a table"),
        ("[wake.launch]\nargs = [1]\n", "wake.launch.args[0]", "expected a string"),
    ],
)
def test_wake_launch_mistakes_name_the_key(section: str, key: str, needle: str) -> None:
    with pytest.raises(ManifestInvalid) as caught:
        parse(BASE + section)
    assert [(e.key, needle in e.message) for e in caught.value.errors] == [(key, True)]


def test_why_not_says_what_is_missing() -> None:
    """No headless resume (unless a command is given), or no conversation to resume."""
    without = parse(BASE)
    assert "no [wake.launch]" in (why_not(without, None, "c1") or "")
    assert why_not(without, ["./bot", "{prompt}"], None) is None
    resuming = parse(BASE + RESUME)
    assert "no conversation to resume" in (why_not(resuming, None, None) or "")
    assert why_not(resuming, None, "c1") is None
    assert "cannot be filled" in (why_not(resuming, ["{oops"], "c1") or "")


def _values(tmp_path: Path) -> dict[str, str]:
    return wake_values(
        url="http://127.0.0.1:1", token="pst_x", token_file=str(tmp_path / "t"),
        agent_id="agt_a", address="a@ws", alias="a", session_id="ses_s",
        state_dir=str(tmp_path), conversation_key="c1", implementation="mine",
    )  # fmt: skip


def test_wake_command_is_the_launch_wiring_then_the_headless_args(tmp_path: Path) -> None:
    """The executable, `[launch]` args, then `[wake.launch]` args, all filled; the session's
    variables in the environment; the prompt starts with `[pager]`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "mine"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    manifest = parse(BASE + '[launch]\nargs = ["--url", "{mcp_url}"]\n' + RESUME)
    environ = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    command = wake_command(
        launch_spec(manifest), manifest, manifest.wake.launch.args,  # type: ignore[union-attr]
        _values(tmp_path), str(tmp_path), environ,
    )  # fmt: skip
    prompt = wake_prompt("a@ws")
    assert command.argv == (
        str(program), "--url", "http://127.0.0.1:1/mcp", "-p", "--resume", "c1", prompt
    )  # fmt: skip
    assert prompt.startswith("[pager] ")
    assert command.env["PAGER_TOKEN"] == "pst_x"
    assert command.env["PAGER_AGENT_ID"] == "agt_a"
    assert command.env["PAGER_TOKEN_FILE"] == str(tmp_path / "t")


def test_wake_command_of_a_program_named_by_the_command(tmp_path: Path) -> None:
    """`executable = "{argv0}"` (shell): the command's first part is the program; a program
    not on the PATH is a LookupError naming it."""
    shell = parse('id = "sh2"\nname = "Any"\nexecutable = "{argv0}"\n')
    values = _values(tmp_path)
    command = wake_command(
        launch_spec(shell), shell, ["true", "{agent_id}"], values, str(tmp_path),
        {"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert os.path.basename(command.argv[0]) == "true"
    assert command.argv[1:] == ("agt_a",)
    with pytest.raises(LookupError, match="nowhere-to-be-found"):
        wake_command(launch_spec(shell), shell, ["nowhere-to-be-found"], values, str(tmp_path),
                     {"PATH": str(tmp_path)})  # fmt: skip
