"""The everyday commands (SPEC §4.1) through real `pager` processes against a real broker:
a wrapped `pager shell` session in each of two repositories and the person in a third
directory, each command's `--json` parsed, and bad input for each."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from pager.cli import main
from pager.commands.common import EXIT_NO_MAIL, EXIT_USAGE
from pager.commands.everyday import WHO_PAGE
from tests.e2e.conftest import Broker, start_broker
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for

PAGER = [sys.executable, "-m", "pager"]


def pager(
    broker: Broker, cwd: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PAGER, *args],
        env={**broker.home.env, **env},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def answer(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def start_shell(broker: Broker, cwd: Path, name: str, script: str) -> subprocess.Popen[str]:
    """`pager shell --session-name NAME -- sh -c SCRIPT`: a wrapped session whose program
    uses the CLI itself (`pager` on PATH is this checkout's)."""
    bin_dir = Path(sys.executable).parent
    env = {**broker.home.env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.Popen(
        [*PAGER, "shell", "--session-name", name, "--", "sh", "-c", script],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_a_person_and_two_wrapped_sessions_talk_through_the_cli(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    """The person (in a third directory) sends to `alice` in api; alice's program, using
    `pager read` and `pager send` from inside its wrapped launch, acts as alice and answers
    the person and `bob` in web; the person reads the answer."""
    person = answer(pager(broker, places["desk"], "whoami", "--json"))
    assert person["implementation"] == "human"
    bob_who, bob_file = tmp_path / "bob-whoami.json", tmp_path / "bob-read.json"
    bob = start_shell(
        broker,
        places["web"],
        "bob",
        f"pager whoami --json > {bob_who}.tmp && mv {bob_who}.tmp {bob_who};"
        f" pager read --wait 60 --json > {bob_file}",
    )
    alice = None
    try:
        wait_for(bob_who.exists, "bob's whoami")
        me_bob = json.loads(bob_who.read_text())
        assert (me_bob["alias"], me_bob["implementation"]) == ("bob", "shell")
        assert me_bob["why"] == "the session of this launch"
        alice = start_shell(
            broker,
            places["api"],
            "alice",
            "pager read --wait 60 --json | head -1 > got.json;"
            f" pager send {person['address']} 'got it' &&"
            f" pager send {me_bob['address']} 'heads up'",
        )
        wait_for(
            lambda: any(a["alias"] == "alice" and a["attached"] for a in
                        answer(pager(broker, places["desk"], "who", "--all", "--json"))["agents"]),
            "alice to attach",
        )  # fmt: skip
        roster = answer(pager(broker, places["desk"], "who", "--all", "--json"))["agents"]
        by_alias = {a["alias"]: a for a in roster}
        assert by_alias[person["alias"]]["attached"] is False
        assert by_alias[person["alias"]]["you"] is True
        host = socket.gethostname().split(".")[0]  # one machine: every identity is on it
        assert person["host"] == host
        assert {a["host"] for a in roster} == {host}
        table = pager(broker, places["desk"], "who", "--all").stdout.splitlines()
        assert table[0].split() == ["ADDRESS", "IMPLEMENTATION", "HOST", "ATTACHED", "LAST",
                                    "SEEN", "WAITING"]  # fmt: skip
        me_alice = by_alias["alice"]
        sent = answer(pager(broker, places["desk"], "send", me_alice["address"],
                            "please review #12", "--json"))  # fmt: skip
        assert sent["recipient"]["address"] == me_alice["address"]
        read = pager(broker, places["desk"], "read", "--wait", "60", "--json")
        [line] = read.stdout.splitlines()
        got = json.loads(line)["message"]
        assert (got["from"], got["body"]) == (me_alice["address"], "got it")
        _, err = await trio.to_thread.run_sync(alice.communicate, None, PROCESS_BOUND)
        assert alice.returncode == 0, err
        first = json.loads((places["api"] / "got.json").read_text())["message"]
        assert (first["from"], first["body"]) == (person["address"], "please review #12")
        _, err = await trio.to_thread.run_sync(bob.communicate, None, PROCESS_BOUND)
        assert bob.returncode == 0, err
        heads_up = json.loads(bob_file.read_text().splitlines()[0])["message"]
        assert (heads_up["from"], heads_up["body"]) == (me_alice["address"], "heads up")
    finally:
        for process in (alice, bob):
            if process is not None and process.poll() is None:
                process.kill()
    sent_list = answer(pager(broker, places["desk"], "sent", "--json"))["messages"]
    assert [(m["to"], m["state"]) for m in sent_list] == [(me_alice["address"], "acknowledged")]
    one = answer(pager(broker, places["desk"], "sent", sent["message_id"], "--json"))
    assert one["state"] == "acknowledged"
    history = answer(pager(broker, places["desk"], "history", "--json"))["messages"]
    assert [m["direction"] for m in history] == ["received", "sent"]
    assert answer(pager(broker, places["desk"], "inbox", "--json"))["waiting"] == 0


def test_people_read_plain_text(broker: Broker, places: dict[str, Path]) -> None:
    """Without --json: aligned columns, the sender, relative times; the message whole in the
    envelope; stdin as the body."""
    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))
    sent = pager(broker, desk, "send", me["alias"], stdin="line one\nline two\n")
    assert sent.returncode == 0, sent.stderr
    assert f"to {me['address']}" in sent.stdout
    assert "it waits in the inbox" in sent.stdout
    inbox = pager(broker, desk, "inbox").stdout.splitlines()
    assert inbox[0].split() == ["ID", "FROM", "AGE", "THREAD", "FIRST", "LINE"]
    assert me["address"] in inbox[1]
    assert "ago" in inbox[1]
    assert inbox[1].endswith("line one")
    read = pager(broker, desk, "read")
    assert read.returncode == 0, read.stderr
    assert f'From "{me["address"]}"' in read.stdout
    assert "line one\nline two\n" in read.stdout
    assert "<<<end-pager-message" in read.stdout
    assert "no mail waiting" in pager(broker, desk, "inbox").stdout


@pytest.mark.parametrize(
    ("args", "stdin", "status", "needle"),
    [
        (("send", "nobody", "hi"), None, 1, "no agent 'nobody'"),
        (("send", "ME", ""), None, 1, "the body is empty"),
        (("send", "ME"), "", 1, "the body is empty"),
        (("send", "ME", "x" * 40000), None, 1, "the limit is 32768"),
        (("send",), None, 2, "the following arguments are required: TO"),
        (("ack", "clm_bogus"), None, 1, "unknown_token"),
        (("sent", "msg_nope"), None, 1, "you sent no message"),
        (("read", "0"), None, 2, "give 1 or more"),
        (("inbox", "-n", "x"), None, 2, "invalid int value"),
    ],
)
def test_bad_input_says_what_to_do_and_changes_nothing(
    broker: Broker, places: dict[str, Path], args: tuple[str, ...], stdin: str | None,
    status: int, needle: str,
) -> None:  # fmt: skip
    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))
    argv = [me["alias"] if arg == "ME" else arg for arg in args]
    done = pager(broker, desk, *argv, stdin=stdin)
    assert done.returncode == status, (done.stdout, done.stderr)
    assert needle in done.stderr + done.stdout
    assert [r for r in broker.export_sync() if r["kind"] == "message"] == []


def test_a_misspelt_command_is_a_usage_error_with_a_suggestion(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`pager sedn api hi` exits 2 (a usage error, as docs/cli.md says) naming `send`."""
    monkeypatch.setenv("PAGER_HOME", str(tmp_path / "home"))
    assert main(["sedn", "api", "hi"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "did you mean send?" in error
    assert main(["cluade"]) == EXIT_USAGE
    assert "did you mean claude?" in capsys.readouterr().err
    assert main(["help", "sedn"]) == EXIT_USAGE
    assert "did you mean send?" in capsys.readouterr().err
    assert main(["stop"]) == EXIT_USAGE  # another word for a command: its name
    assert "did you mean exit?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "wait", [("--wait", "-5"), ("--wait", "nan"), ("--wait", "inf"), ("--wait=-inf",),
             ("--wait", "soon"), ("--wait", "")],
)  # fmt: skip
def test_a_bad_wait_is_refused_before_anything_runs(wait: tuple[str, ...], tmp_path: Path) -> None:
    """Refused as a usage error naming --wait; no broker is started for it."""
    home = PagerHome(tmp_path / "home")
    try:
        done = home.run("read", *wait, timeout=PROCESS_BOUND)
        assert done.returncode == EXIT_USAGE, (done.stdout, done.stderr)
        assert "argument --wait: " in done.stderr
        assert "give 0 or more" in done.stderr
        assert not (home.root / "broker.json").exists()
    finally:
        home.kill_all()


def test_a_read_that_gets_nothing_exits_with_its_own_status(
    broker: Broker, places: dict[str, Path]
) -> None:
    """A script tells "nothing came within --wait" (exit 4) from mail (exit 0)."""
    desk = places["desk"]
    for args in (("read", "--wait", "0.2"), ("read", "--json"), ("read",)):
        done = pager(broker, desk, *args)
        assert (done.returncode, done.stdout) == (EXIT_NO_MAIL, ""), (args, done.stderr)
    me = answer(pager(broker, desk, "whoami", "--json"))
    assert pager(broker, desk, "send", me["alias"], "hi").returncode == 0
    done = pager(broker, desk, "read", "--wait", "5")
    assert done.returncode == 0, done.stderr
    assert "hi" in done.stdout


def test_a_revoked_session_is_refused_not_taken_for_the_person(
    broker: Broker, places: dict[str, Path]
) -> None:
    """A token the broker does not know (revoked, ended) is an error: the command never falls
    back to acting as the person."""
    done = pager(broker, places["desk"], "send", "x", "hi", PAGER_TOKEN="tok_revoked0000")
    assert done.returncode == 1
    assert "unknown session token" in done.stderr
    assert "unset PAGER_TOKEN to act as yourself" in done.stderr
    assert broker.export_sync() == []  # no identity (and so no message)


def test_no_broker_and_none_startable(tmp_path: Path) -> None:
    """A state directory that cannot be used: exit 1 naming it, nothing else."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
    done = subprocess.run(
        [*PAGER, "send", "x", "hi"],
        env={**env, "PAGER_HOME": str(blocker)},
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )
    assert done.returncode == 1
    assert str(blocker) in done.stderr


def test_the_person_renames_and_stays_the_person(broker: Broker, places: dict[str, Path]) -> None:
    desk = places["desk"]
    before = answer(pager(broker, desk, "whoami", "--json"))
    renamed = answer(pager(broker, desk, "alias", "ada", "--json"))
    assert renamed["alias"] == "ada"
    after = answer(pager(broker, desk, "whoami", "--json"))
    assert (after["agent_id"], after["alias"]) == (before["agent_id"], "ada")


async def test_archive_unarchive_purge_from_the_command_line(
    broker: Broker, places: dict[str, Path]
) -> None:
    """By alias, address or id; purge asks for --yes off a terminal; an unknown or ambiguous
    name changes nothing."""
    bob = await broker.register("bob")
    await broker.register("bob", workspace=str(places["web"]))  # a second `bob` elsewhere
    desk = places["desk"]
    ambiguous = pager(broker, desk, "archive", "bob")
    assert ambiguous.returncode == 1
    assert "names 2 agents" in ambiguous.stderr
    assert bob["address"] in ambiguous.stderr
    unknown = pager(broker, desk, "archive", bob["address"], "nobody")
    assert unknown.returncode == 1
    assert "no agent 'nobody'" in unknown.stderr

    async def archived() -> list[bool]:
        """Whether bob's identity is archived, once for each identity with his id."""
        found = await broker.identities()
        return [r["archived_at"] is not None for r in found if r["agent_id"] == bob["agent_id"]]

    assert await archived() == [False]  # nothing acted: all or none
    done = pager(broker, desk, "archive", bob["address"])
    assert done.returncode == 0, done.stderr
    assert f"archived {bob['address']} (1 session(s) ended)" in done.stdout
    assert await archived() == [True]
    assert pager(broker, desk, "unarchive", bob["agent_id"]).returncode == 0
    assert await archived() == [False]
    refused = pager(broker, desk, "purge", bob["agent_id"])
    assert refused.returncode == 1
    assert "add --yes" in refused.stderr
    assert await archived() == [False]  # still there
    purged = answer(pager(broker, desk, "purge", bob["agent_id"], "--yes", "--json"))
    assert purged[0]["agent_id"] == bob["agent_id"]
    assert await archived() == []


async def test_export_streams_every_identity_then_every_message(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    bob = await broker.register("bob")
    desk = places["desk"]
    for body in ("first", "second"):
        assert pager(broker, desk, "send", bob["address"], body).returncode == 0
    out = tmp_path / "export.jsonl"
    done = pager(broker, desk, "export", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "exported 2 identities and 2 messages" in done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["identity", "identity", "message", "message"]
    assert {r["v"] for r in records} == {1}
    first = records[2]
    assert (first["to"], first["to_address"], first["body"], first["state"]) == (
        bob["agent_id"], bob["address"], "first", "queued"
    )  # fmt: skip
    later = pager(broker, desk, "export", "--since", "2099-01-01")
    assert [json.loads(line)["kind"] for line in later.stdout.splitlines()] == ["identity"] * 2
    recent = pager(broker, desk, "export", "--since", "1h")
    assert len(recent.stdout.splitlines()) == 4
    bad = pager(broker, desk, "export", "--since", "tomorrow")
    assert bad.returncode == 1
    assert "give an ISO 8601 time" in bad.stderr


def test_export_counts_in_the_right_number(broker: Broker, places: dict[str, Path]) -> None:
    """`1 identity and 1 message`, not `1 identities and 1 messages`."""
    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))
    assert pager(broker, desk, "send", me["alias"], "a note to self").returncode == 0
    done = pager(broker, desk, "export")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "exported 1 identity and 1 message"
    none = pager(broker, desk, "export", "--since", "2099-01-01")
    assert none.stderr.strip() == "exported 1 identity and 0 messages"


@pytest.mark.parametrize(
    ("query", "token", "status"),
    [("", "", 401), ("?since=soon", "SECRET", 400), ("?colour=red", "SECRET", 400)],
)
def test_export_route_refuses_bad_requests(
    broker: Broker, query: str, token: str, status: int
) -> None:
    from pager.client import request_json

    secret = broker.secret if token == "SECRET" else ""
    code, answer = request_json(broker.url, "GET", f"/v1/export{query}", token=secret)
    assert code == status, answer
    assert answer["error"]["code"] in ("unauthenticated", "validation_failed")


async def test_reset_keeps_a_backup_and_starts_empty(
    broker: Broker, places: dict[str, Path]
) -> None:
    bob = await broker.register("bob")
    desk = places["desk"]
    assert pager(broker, desk, "send", bob["address"], "hello").returncode == 0
    refused = pager(broker, desk, "reset")
    assert refused.returncode == 1
    assert "add --yes" in refused.stderr
    assert [m["body"] for m in await broker.messages()] == ["hello"]
    done = answer(pager(broker, desk, "reset", "--yes", "--json"))
    assert done["deleted"] == {"identities": 2, "sessions": 1, "messages": 1}
    backup = Path(done["backup"])
    assert backup.name.startswith("pager.db.bak-reset-")
    assert os.stat(backup).st_mode & 0o777 == 0o600
    # The backup is a copy of the SQLite database file, by design: what it holds is read
    # from the file itself (no broker serves it).
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{backup}?mode=ro", uri=True)) as kept:
        assert kept.execute("SELECT body FROM messages").fetchall() == [("hello",)]
    assert pager(broker, desk, "status").returncode == 0  # a fresh broker runs
    # The fresh broker may listen on another port: `pager start` adopts it and says where.
    fresh = start_broker(broker.home, broker.workspace)
    assert await fresh.export() == []  # no identity, no message


async def test_history_full_prints_a_long_body_whole(
    broker: Broker, places: dict[str, Path]
) -> None:
    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))
    body = "".join(f"line {n:05d}\n" for n in range(2000))
    assert pager(broker, desk, "send", me["alias"], "-", stdin=body).returncode == 0
    full = pager(broker, desk, "history", "--full", "-n", "1")
    assert full.returncode == 0, full.stderr
    assert body in full.stdout
    assert "[truncated" not in full.stdout


async def test_the_loop_guard_chain_through_real_processes(broker: Broker) -> None:
    """The person (`pager send`) → a (hop 0) → b (1) → a (2) → b (3) → a: refused, a tool
    error that tells b to ask its person; b's person types a prompt (its real `pager hook`
    reports it) and b's next send starts again at hop 1. `pager export` shows the hops."""
    from tests.e2e.conftest import mcp_session, structured, tool_error

    a = await broker.register("a")
    b = await broker.register("b", implementation="claude", conversation_key="conv-b")
    sent = pager(broker, broker.workspace, "send", "a", "please ask b")
    assert sent.returncode == 0, sent.stderr
    with trio.fail_after(60):
        async with (
            mcp_session(broker.url, a["token"]) as ma,
            mcp_session(broker.url, b["token"]) as mb,
        ):

            async def take_and_send(client: Any, to: str) -> Any:
                claims = structured(await client.call_tool("fetch", {}))["claims"]
                tokens = [c["token"] for c in claims]
                structured(await client.call_tool("ack", {"tokens": tokens}))
                return await client.call_tool("send", {"to": to, "body": "on"})

            for client, to in ((ma, "b"), (mb, "a"), (ma, "b")):
                structured(await take_and_send(client, to))
            refused = tool_error(await take_and_send(mb, "a"))
            assert (refused["code"], refused["hop"], refused["max_hops"]) == ("hop_limit", 4, 3)
            person_at = answer(pager(broker, broker.workspace, "whoami", "--json"))["address"]
            assert refused["chain"] == [person_at, a["address"], b["address"], a["address"],
                                        f"{b['address']} (you)", a["address"]]  # fmt: skip
            assert "Ask your person" in refused["message"]
            from pager.client import request_json

            _, snapshot = request_json(broker.url, "GET", "/v1/snapshot", token=broker.secret)
            assert snapshot["totals"]["refused_sends"] == 1  # counted for the operator
            payload = json.dumps({"session_id": "conv-b", "hook_event_name": "UserPromptSubmit",
                                  "prompt": "yes, go on"})  # fmt: skip
            hooked = pager(broker, broker.workspace, "hook", "--implementation", "claude",
                           "UserPromptSubmit", stdin=payload)  # fmt: skip
            assert hooked.returncode == 0, hooked.stderr
            structured(await mb.call_tool("send", {"to": "a", "body": "my person says go on"}))
    records = [json.loads(line) for line in
               pager(broker, broker.workspace, "export").stdout.splitlines()]  # fmt: skip
    assert [(r["origin"], r["hop"]) for r in records if r["kind"] == "message"] == [
        ("human", 0), ("agent", 1), ("agent", 2), ("agent", 3), ("agent", 1)
    ]  # fmt: skip


async def test_inbox_all_lists_every_waiting_inbox_in_three_columns(
    broker: Broker, places: dict[str, Path]
) -> None:
    bob = await broker.register("bob")
    carol = await broker.register("carol", workspace=str(places["web"]))
    await broker.register("dave")  # nothing waiting: not listed
    desk = places["desk"]
    for to in (bob["address"], bob["address"], carol["address"]):
        assert pager(broker, desk, "send", to, "hi").returncode == 0
    listed = answer(pager(broker, desk, "inbox", "--all", "--json"))
    assert sorted((i["inbox"], i["waiting"], i["attached"]) for i in listed) == [
        (bob["address"], 2, True), (carol["address"], 1, True)
    ]  # fmt: skip
    lines = pager(broker, desk, "inbox", "--all").stdout.splitlines()
    assert lines[0].split() == ["INBOX", "WAITING", "ATTACHED"]
    assert sorted(line.split() for line in lines[1:]) == [
        [bob["address"], "2", "yes"], [carol["address"], "1", "yes"]
    ]  # fmt: skip


async def test_who_lists_a_roster_longer_than_a_page_whole(
    broker: Broker, places: dict[str, Path]
) -> None:
    """More agents than one roster page holds (500): `pager who` follows next_cursor, so its
    table and its one `--json` document list every agent once, by workspace then alias."""
    count = WHO_PAGE + 20
    workspace = str(places["api"])
    body = {"workspace": workspace, "implementation": "shell"}
    headers = {"Authorization": f"Bearer {broker.secret}"}
    with trio.fail_after(PROCESS_BOUND):
        async with httpx2.AsyncClient(base_url=broker.url, headers=headers, timeout=30) as http:
            for n in range(count):
                registered = await http.post(
                    "/v1/register", json={**body, "session_name": f"peer-{n:03d}"}
                )
                assert registered.status_code == 201, registered.text
    bob = await broker.register("bob")  # in the broker's own workspace
    listed = answer(pager(broker, places["api"], "who", "--all", "--json"))
    assert set(listed) == {"scope", "agents"}
    agents = listed["agents"]
    assert len(agents) == len({a["agent_id"] for a in agents}) == count + 2  # and the person
    assert bob["agent_id"] in {a["agent_id"] for a in agents}
    order = [(a["address"].split("@")[1], a["alias"].lower()) for a in agents]
    assert order == sorted(order)
    here = answer(pager(broker, places["api"], "who", "--json"))["agents"]
    assert len(here) == count + 1  # the workspace's peers and the person in it
    table = pager(broker, places["api"], "who", "--all").stdout.splitlines()
    assert len(table) == 1 + count + 2
    assert [line.split()[0] for line in table[1:]] == [a["address"] for a in agents]


def test_read_follow_keeps_reading_until_interrupted(
    broker: Broker, places: dict[str, Path]
) -> None:
    import signal

    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))

    def attached(alias: str) -> bool:
        agents = answer(pager(broker, desk, "who", "--json"))["agents"]
        [person] = [agent for agent in agents if agent["alias"] == alias]
        return bool(person["attached"])

    assert not attached(me["alias"])
    follower = subprocess.Popen(
        [*PAGER, "read", "--follow", "--json"],
        env=broker.home.env,
        cwd=desk,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started in the background (`&`) ignores SIGINT, and a
        # child inherits that, so Ctrl-C (SIGINT here) would never reach it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert follower.stdout is not None
        for n in range(3):
            assert pager(broker, desk, "send", me["alias"], f"note {n}").returncode == 0
            line = follower.stdout.readline()  # each one as it arrives
            assert json.loads(line)["message"]["body"] == f"note {n}"
        assert attached(me["alias"]), "the person shows attached while a follower is open"
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=PROCESS_BOUND) == 130
    finally:
        if follower.poll() is None:
            follower.kill()
    assert answer(pager(broker, desk, "inbox", "--json"))["waiting"] == 0  # all acknowledged
    assert not attached(me["alias"]), "and no longer once it has ended"


def _shim(tmp_path: Path, name: str, script: str) -> Path:
    """A FAKE harness program `name` (a shell script) that runs `script`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / name
    shim.write_text(f"#!/bin/sh\n{script}\n")
    shim.chmod(0o755)
    return shim


def _in_harness(broker: Broker, shim: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return subprocess.run(
        [str(shim)], env={**broker.home.env, "PATH": path}, cwd=cwd, capture_output=True,
        text=True, timeout=PROCESS_BOUND, check=False,
    )  # fmt: skip


async def test_a_command_inside_a_harness_acts_as_the_session_its_hook_bound(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    """A harness started without `pager` (its session joined through a plugin): its hook
    names the harness process, and a command its agent runs later acts as that session."""
    x = await broker.register("x", implementation="claude", conversation_key="conv-x")
    payload = json.dumps({"session_id": "conv-x", "hook_event_name": "UserPromptSubmit",
                          "prompt": "hi"})  # fmt: skip
    shim = _shim(
        tmp_path,
        "claude",
        f"echo '{payload}' | pager hook --implementation claude UserPromptSubmit >/dev/null\n"
        "pager whoami --json",
    )
    done = _in_harness(broker, shim, places["desk"])
    assert done.returncode == 0, done.stderr
    me = json.loads(done.stdout)
    assert (me["agent_id"], me["acting_as"]) == (x["agent_id"], "harness")
    assert me["why"].startswith("the session of claude (pid ")


def test_a_harness_without_a_session_is_refused_not_taken_for_the_person(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    shim = _shim(tmp_path, "codex", "pager send somebody hello")
    done = _in_harness(broker, shim, places["desk"])
    assert done.returncode == 1
    assert "this command runs inside codex (pid " in done.stderr
    assert "`pager codex`" in done.stderr
    assert broker.export_sync() == []  # no identity (and so no message)


async def test_claim_takes_over_a_detached_identity_and_its_inbox(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    """Inside a session, `pager claim old` becomes `old` (id, inbox) when old is detached;
    an attached holder needs --force; the person has no session to take one over with."""
    old = await broker.register("old")
    status, _ = await broker.post("/v1/sessions/current/detach", {}, token=old["token"])
    assert status == 200
    desk = places["desk"]
    assert pager(broker, desk, "send", old["address"], "for old").returncode == 0
    busy = await broker.register("busy")
    out = tmp_path / "claimed.json"
    script = (
        f"pager claim busy 2> {tmp_path}/refused.txt;"
        f" pager claim old --json > {out} && pager inbox --json > {tmp_path}/inbox.json"
    )
    shell = start_shell(broker, broker.workspace, "newcomer", script)
    _, err = await trio.to_thread.run_sync(shell.communicate, None, PROCESS_BOUND)
    assert shell.returncode == 0, err
    assert (
        "'busy' is attached to a session; add --force to end that session"
        in (tmp_path / "refused.txt").read_text()
    )
    claimed = json.loads(out.read_text())
    assert (claimed["agent_id"], claimed["alias"]) == (old["agent_id"], "old")
    inbox = json.loads((tmp_path / "inbox.json").read_text())
    assert [m["body"] for m in inbox["messages"]] == ["for old"]
    assert busy["agent_id"] != claimed["agent_id"]
    person = pager(broker, desk, "claim", "old")
    assert person.returncode == 1
    # The person is told in the command line's words what to do instead.
    assert "rename yourself with `pager alias NAME`" in person.stderr
    assert "run `pager claim NAME` inside a session started with `pager <harness>`" in person.stderr
