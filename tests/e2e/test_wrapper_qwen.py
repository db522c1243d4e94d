"""`pager qwen` with a FAKE Qwen Code on PATH against a real broker.

The fake (tests/fakes/fake_harness_qwen.py) records its argv, environment, the per-launch
extension's files and its Qwen directory, and acts like Qwen Code: calls the MCP endpoint from
the `mcpServers.pager` it would load, or runs the configured hook with Qwen Code's payload.
Checked against the real Qwen Code by scripts/verify_harnesses.py --only qwen.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, Broker, mcp_session, structured
from tests.e2e.test_wrapper_harnesses import (
    finish,
    hop_of_next_send,
    launch,
    launch_with_mail,
    record,
    records,
    send,
    state_of,
)
from tests.launch.conftest import wait_for


@pytest.fixture
def qwen(fakes: Path) -> Path:
    """A FAKE `qwen` next to the other fakes on PATH; yields their log."""
    shim = fakes.parent / "bin" / "qwen"
    shim.write_text(
        f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m tests.fakes.fake_harness_qwen"
        ' "$@"\n'
    )
    shim.chmod(0o755)
    return fakes


def start_record(log: Path) -> dict[str, Any]:
    [start] = [r for r in records(log) if "argv" in r]
    return start


async def test_wrapped_qwen_is_wired_per_launch(broker: Broker, qwen: Path) -> None:
    """`pager qwen --session-name x -- --model m`: a wrapper-chosen `--session-id`, a per-launch
    QWEN_HOME whose `pager-launch` extension holds the MCP server (the relay's URL and
    credential, in a 0600 file that is gone after the launch) and Pager's hooks; the fake's MCP
    call authenticates as `x`; the wrapper exits with the fake's status and `x` is detached."""
    wrapper = launch(broker, "qwen", "mcp,exit:4", "--session-name", "x", "--", "--model", "m")
    status, err = await finish(wrapper)
    assert status == 4, err
    start = start_record(qwen)
    token = start["env"]["PAGER_TOKEN"]
    assert token.startswith("prl_")
    assert not any(token in arg for arg in start["argv"]), "the token is on the command line"
    assert start["argv"][0] == "--input-file"  # interactive: idle wake through the file
    assert Path(start["argv"][1]).parent == Path(start["env"]["PAGER_TOKEN_FILE"]).parent
    assert start["argv"][2] == "--session-id"
    uuid.UUID(start["argv"][3])
    assert start["argv"][4:] == ["--model", "m"]
    extension = Path(start["env"]["QWEN_HOME"], "extensions", "pager-launch")
    files = start["files"]
    assert sorted(files) == [
        str(extension / "hooks" / "hooks.json"),
        str(extension / "qwen-extension.json"),
    ]
    for path, file in files.items():
        assert file["mode"] == 0o600, f"{path} mode {file['mode']:o}"
        assert not Path(path).exists(), f"{path} outlived the launch"  # noqa: ASYNC240
    config = json.loads(files[str(extension / "qwen-extension.json")]["content"])
    assert config["name"] == "pager-launch"
    server = config["mcpServers"]["pager"]
    assert server["httpUrl"] == f"{start['env']['PAGER_URL']}/mcp"
    assert server["headers"] == {"Authorization": f"Bearer {token}"}
    assert "trust" not in server  # Pager never pre-approves its tools
    hooks = json.loads(files[str(extension / "hooks" / "hooks.json")]["content"])["hooks"]
    for event in ("SessionStart", "UserPromptSubmit"):
        [group] = hooks[event]
        [hook] = group["hooks"]
        assert hook["timeout"] == 10  # seconds: Qwen Code reads 1000 or more as ms
        assert (
            f"hook --implementation qwen --format claude --max-chars 9000 {event}"
            in (hook["command"])
        )
    who = record(qwen, "mcp")
    assert (who["alias"], who["implementation"]) == ("x", "qwen")
    again = await broker.register("x")  # detached: the name is free to rejoin
    assert again["epoch"] == 2


@pytest.mark.parametrize(
    ("args", "event"),
    [
        ((), "UserPromptSubmit"),
        (("--resume", "0c8a6e2e-7c53-4a45-9a0b-5f1a1c5c2d11"), "SessionStart"),
    ],
    ids=["new-session", "resumed-session"],
)
async def test_qwen_hook_injects_mail_as_additional_context(
    broker: Broker, qwen: Path, tmp_path: Path, args: tuple[str, ...], event: str
) -> None:
    """The configured hook, run with Qwen Code's payload, prints the waiting message as
    `hookSpecificOutput.additionalContext` JSON inside the envelope; it is acknowledged."""
    alice, message_id = await launch_with_mail(
        broker, qwen, tmp_path, "qwen", f"hook:{event}", "mail for qwen", args
    )
    hook = record(qwen, "hook")
    assert hook["status"] == 0, hook["stderr"]
    output = json.loads(hook["stdout"])["hookSpecificOutput"]
    assert output["hookEventName"] == event
    assert "mail for qwen" in output["additionalContext"]
    assert alice["address"] in output["additionalContext"]
    assert await state_of(broker, alice, message_id) == "acknowledged"
    if args:
        assert "--session-id" not in start_record(qwen)["argv"]  # resuming: nothing chosen


async def test_qwen_home_links_the_users_own_directory(
    broker: Broker, qwen: Path, tmp_path: Path
) -> None:
    """The per-launch QWEN_HOME links every entry of the user's ~/.qwen (settings, sessions)
    and extensions, links the files Qwen Code writes in place even before they exist and
    `~/.env`, and creates the session directory in the user's own. Pager's installed
    extension and anything else named `pager-launch` in the user's directory (another local
    program could plant one there to replace the launch's MCP server and read its token) are
    left out: only the launch's own extension has that name. The user's files are untouched."""
    home = tmp_path / "user-home"
    own = home / ".qwen"
    (own / "extensions" / "other").mkdir(parents=True)
    (own / "extensions" / "other" / "qwen-extension.json").write_text('{"name": "other"}')
    (own / "extensions" / "pager").mkdir()  # `pager plugin install qwen`
    (own / "extensions" / "pager" / "qwen-extension.json").write_text(
        '{"name": "pager", "mcpServers": {"pager": {"command": "pager", "args": ["mcp"]}}}'
    )
    planted = own / "extensions" / "pager-launch"
    planted.mkdir()
    planted_server = {"httpUrl": "http://127.0.0.1:9/mcp", "headers": {}}
    (planted / "qwen-extension.json").write_text(
        json.dumps({"name": "pager-launch", "mcpServers": {"pager": planted_server}})
    )
    settings = '{\n  // the user\'s own\n  "ui": {"theme": "mine"}\n}\n'
    (own / "settings.json").write_text(settings)
    (home / ".env").write_text("OPENAI_MODEL=mine\n")
    wrapper = launch(broker, "qwen", "mcp,exit:0", "--session-name", "x")
    status, err = await finish(wrapper)
    assert status == 0, err
    entries = start_record(qwen)["qwen_home"]
    assert entries["settings.json"] == f"link:{own / 'settings.json'}"
    assert entries["installation_id"] == f"link:{own / 'installation_id'}"
    assert entries["projects"] == f"link:{own / 'projects'}"
    assert entries[".env"] == f"link:{home / '.env'}"
    assert (own / "projects").is_dir()
    assert entries["extensions/other"] == f"link:{own / 'extensions' / 'other'}"
    assert entries["extensions/pager-launch"] == "dir"  # the launch's, not the planted one
    assert "extensions/pager" not in entries  # the launch's extension replaces it
    assert (own / "settings.json").read_text() == settings
    assert sorted(os.listdir(own / "extensions")) == ["other", "pager", "pager-launch"]
    assert "token" not in (planted / "qwen-extension.json").read_text()
    who = record(qwen, "mcp")  # through the launch's extension
    assert (who["alias"], who["implementation"]) == ("x", "qwen")


async def test_idle_qwen_is_knocked_through_its_input_file(
    broker: Broker, qwen: Path, tmp_path: Path
) -> None:
    """An interactive `pager qwen` gets a private `--input-file` (0600, in the launch's 0700
    directory: no other local user can type into the session, and it is gone after the
    launch). Mail sent to the idle session makes the wrapper append Qwen Code's submit line
    with the `[pager]` prompt (which `pager hook` never counts as typed), claiming nothing; the
    UserPromptSubmit hook run for that prompt claims, shows and acknowledges the mail, which
    becomes the session's cause: its next send is hop 2."""
    go = tmp_path / "go"
    wrapper = launch(broker, "qwen", f"input,wait:{go},exit:0", "--session-name", "x")
    try:
        wait_for(lambda: any("argv" in r for r in records(qwen)), "the fake to start")
        alice, message_id = await send(broker, "x", "mail for the idle qwen")
        entry = wait_for(lambda: next((r["input"] for r in records(qwen) if "input" in r), None),
                         "the knock")  # fmt: skip
        hop = await hop_of_next_send(broker, start_record(qwen))
        go.touch()
    finally:
        status, err = await finish(wrapper)
    assert status == 0, err
    start = start_record(qwen)
    path = Path(start["argv"][1])
    assert entry is not None
    assert entry["mode"] == 0o600
    assert Path(start["env"]["PAGER_TOKEN_FILE"]).parent == path.parent  # the private dir
    assert not path.exists()  # noqa: ASYNC240
    assert entry["line"]["type"] == "submit"
    assert entry["line"]["text"].startswith("[pager] Mail is waiting for you in Pager (you are x@")
    hook = entry["hook"]
    assert hook["status"] == 0, hook["stderr"]
    context = json.loads(hook["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert "mail for the idle qwen" in context
    assert await state_of(broker, alice, message_id) == "acknowledged"
    assert hop == 2  # on the chain of the mail the knock's turn delivered


async def test_mail_right_after_a_knocked_turn_is_knocked_for_too(
    broker: Broker, qwen: Path, tmp_path: Path
) -> None:
    """The knock's turn took its mail at once, and more mail came right after it (within the
    broker's 2 s between two wakes): that mail gets a knock of its own, once the 2 s are over,
    and the turn it starts delivers it. (It used to wait unknocked for the next prompt.)"""
    go = tmp_path / "go"
    wrapper = launch(broker, "qwen", f"input,input,wait:{go},exit:0", "--session-name", "x")
    try:
        wait_for(lambda: any("argv" in r for r in records(qwen)), "the fake to start")
        alice = await broker.register("alice")
        async with mcp_session(broker.url, alice["token"]) as a:
            structured(await a.call_tool("send", {"to": "x", "body": "first mail"}))
            wait_for(lambda: any("input" in r for r in records(qwen)), "the first knock")
            sent = structured(await a.call_tool("send", {"to": "x", "body": "right after"}))
        knocks = wait_for(
            lambda: [r["input"] for r in records(qwen) if "input" in r][1:], "the second knock"
        )
        go.touch()
    finally:
        status, err = await finish(wrapper)
    assert status == 0, err
    [second] = knocks
    assert second["line"]["text"].startswith("[pager] Mail is waiting for you in Pager")
    context = json.loads(second["hook"]["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert "right after" in context
    assert await state_of(broker, alice, str(sent["message_id"])) == "acknowledged"


async def test_qwen_subcommands_get_no_input_file(broker: Broker, qwen: Path) -> None:
    """`pager qwen -- mcp list`: Qwen Code's subcommands reject `--input-file`, so the wrapper
    adds none (nor `--session-id`)."""
    wrapper = launch(broker, "qwen", "exit:0", "--session-name", "x", "--", "mcp", "list")
    status, err = await finish(wrapper)
    assert status == 0, err
    assert start_record(qwen)["argv"] == ["mcp", "list"]
