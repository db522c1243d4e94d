"""Each edge says what to do next in its own language (pager/domain/hints.py): the command
line names commands and flags, an MCP client the tools and their fields, /v1 its routes; and
a body over the limit gets the same clear answer at every size, from the CLI and from /v1."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import httpx2
import pytest
import trio

from pager.domain.body_limit import BODY_CAP
from pager.domain.delivery import NotApplied
from pager.domain.hints import HINTS, NOT_APPLIED, Edge, Hint
from tests.e2e.conftest import Broker, mcp_session, tool_error
from tests.e2e.test_everyday_cli import pager

#: What only an MCP client is told: tool names and their fields.
MCP_WORDS = re.compile(r"\broster\b|scope 'all'|message_status|pass force|\bfetch\b")
#: What only a person at the command line is told: commands and flags.
CLI_WORDS = re.compile(r"`pager |--force|--all")


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """A CLI command's one-line refusal (exit status 1), checked for MCP words."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    text = done.stderr + done.stdout
    assert "Traceback" not in text
    assert not MCP_WORDS.search(text), text
    return text


async def test_the_command_line_names_commands_not_tools(broker: Broker) -> None:
    """The cases a newcomer met: each error names the command or flag to use next."""
    await broker.register("api")  # holds `api` in the person's workspace, attached
    here = broker.workspace
    text = refused(pager(broker, here, "send", "nosuchagent", "hi"))
    assert "no agent 'nosuchagent'" in text
    assert "`pager who --all` for other workspaces" in text
    text = refused(pager(broker, here, "sent", "msg_x"))
    assert "you sent no message 'msg_x'" in text
    assert "`pager sent ID` shows your own sends" in text
    text = refused(pager(broker, here, "alias", "api"))
    assert "the alias 'api' belongs to" in text
    # The person has no session, so it is not told to take the name with --force.
    assert "choose another name" in text
    assert "`pager <harness>`" in text
    text = refused(pager(broker, here, "ack", "bogus"))
    assert "not applied bogus: no message was handed out with this token" in text
    assert "`pager read --no-ack`" in text


async def test_a_session_at_the_command_line_is_told_force(broker: Broker) -> None:
    """Inside a session (its token), a taken alias can be taken over: it says `--force`."""
    await broker.register("api")
    me = await broker.register("web")
    done = pager(broker, broker.workspace, "alias", "api", PAGER_TOKEN=me["token"])
    text = refused(done)
    assert "choose another name, or add --force to take it" in text


async def test_mcp_tools_name_tools_not_commands(broker: Broker) -> None:
    """The same refusals over MCP (the official SDK client): tools and fields, no CLI."""
    alice = await broker.register("alice")
    await broker.register("bob")
    with trio.fail_after(60):
        async with mcp_session(broker.url, alice["token"]) as a:
            errors = [
                tool_error(await a.call_tool("send", {"to": "nosuchagent", "body": "hi"})),
                tool_error(await a.call_tool("message_status", {"message_id": "msg_x"})),
                tool_error(await a.call_tool("update_agent_alias", {"alias": "bob"})),
            ]
    said = [error["message"] for error in errors]
    for message in said:
        assert not CLI_WORDS.search(message), message
        assert "/v1/" not in message
    assert said[0] == "no agent 'nosuchagent'; see roster (scope 'all' for other workspaces)"
    assert said[1] == "you sent no message 'msg_x'; message_status shows your own sends"
    assert said[2].endswith("; choose another alias, or pass force to take it")
    assert [error["hint"] for error in errors] == ["roster", "own_sends", "alias_force"]
    assert [error["code"] for error in errors] == [
        "unknown_recipient",
        "not_found",
        "alias_conflict",
    ]


async def test_v1_names_routes_and_carries_the_hint_key(broker: Broker) -> None:
    """A client of /v1 is told the route, and gets the key to say it in its own words."""
    me = await broker.register("alice")
    status, answer = await broker.post(
        "/v1/me/send", {"to": "nosuchagent", "body": "hi"}, token=me["token"]
    )
    assert status == 404
    assert answer["error"] == {
        "code": "unknown_recipient",
        "message": "no agent 'nosuchagent'; see GET /v1/me/roster (?scope=all for other"
        " workspaces)",
        "hint": "roster",
    }


def test_every_hint_has_words_for_every_edge() -> None:
    """No key without text for each edge, no text without a key; every ack reason too."""
    assert set(HINTS) == {(hint, edge) for hint in Hint for edge in Edge}
    assert all(text.strip() for text in HINTS.values())
    assert set(NOT_APPLIED) == {(reason.value, edge) for reason in NotApplied for edge in Edge}


def test_every_hint_key_used_in_the_code_is_in_the_table() -> None:
    """Each `Hint.X` the code raises with names a key the table has (a typo fails here)."""
    root = Path(__file__).parents[2]
    used = {
        match
        for folder in ("pager", "actors")
        for path in (root / folder).rglob("*.py")
        for match in re.findall(r"\bHint\.([A-Z_]+)\b", path.read_text())
    }
    assert used, "no hint is used anywhere"
    assert used <= {hint.name for hint in Hint}


@pytest.mark.parametrize("size", [40_000, 1_100_000, 10_000_000], ids=["40KB", "1.1MB", "10MB"])
async def test_pager_send_says_the_body_limit_at_every_size(broker: Broker, size: int) -> None:
    """`pager send api - < big.txt`: the same clear refusal (exit 1) whatever the size, and
    nothing is sent."""
    await broker.register("api")
    body = "a" * size  # as a file piped in: `pager send api - < big.txt`
    done = pager(broker, broker.workspace, "send", "api", "-", stdin=body)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        f"pager: the body is {size} bytes; the limit is {BODY_CAP}. Send less, or split it"
    )
    assert (await broker.counts()).messages == 0


def test_curl_with_a_10mb_body_gets_a_413_naming_the_limit(broker: Broker, tmp_path: Path) -> None:
    """curl sends the whole body before it reads: it gets the JSON answer, not a reset."""
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 10_000_000)
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "30", "-w", "\n%{http_code}",
         "-H", f"Authorization: Bearer {broker.secret}", "-H", "Content-Type: application/json",
         "--data-binary", f"@{big}", f"{broker.url}/v1/me/send?workspace={broker.workspace}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body, _, status = done.stdout.rpartition("\n")
    assert status == "413"
    assert httpx2.Response(413, content=body).json() == {
        "error": {
            "code": "oversized_content",
            "message": "the request body is 10000000 bytes; the limit is 1048576."
            " Send less, or split it",
            "limit": 1048576,
            "size": 10000000,
        }
    }


def test_a_raw_10mb_send_gets_its_answer(broker: Broker) -> None:
    """A client that writes all 10 MB before reading (a script's `sendall`) reads the 413:
    the broker reads and discards the body rather than resetting the connection."""
    host, port = broker.url.removeprefix("http://").split(":")
    size = 10_000_000
    head = (
        f"POST /v1/me/send HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {broker.secret}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        sock.sendall(b"x" * size)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_in, _, body = data.partition(b"\r\n\r\n")
    assert head_in.startswith(b"HTTP/1.1 413")
    error = httpx2.Response(413, content=body).json()["error"]
    assert (error["code"], error["limit"], error["size"]) == ("oversized_content", 1048576, size)
