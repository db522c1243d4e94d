"""`[wake.hub]` and `[launch] before`: idle wake through a harness's hub daemon
(pager/launch/hub_wake.py): how a manifest declares them, which launches get them, and what a
knock sends, against an in-process hub on 127.0.0.1 port 0 speaking Cline's hub protocol."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, RejectConnection, Request, TextMessage

from pager.implementations import Manifest, ManifestInvalid, Source, SourceKind, parse_text
from pager.implementations.launching import launch_spec
from pager.launch.hub_wake import HubError, HubKnock
from pager.launch.knock_mark import MARK, has_mark
from pager.launch.wake_command import wake_values
from pager.launch.wake_prompt import wake_prompt
from pager.launch.wrapper import HarnessCommand, harness_command

#: The pid of the launch's TUI (holding its credential), and of another terminal's Cline.
TUI, OTHER = 4242, 4343
SOURCE = Source(SourceKind.USER, "/cfg/implementations/x.toml", "x.toml")
BASE = (
    'id = "mine"\nname = "Mine"\nexecutable = "mine"\n'
    '[resume]\nother_subcommands = ["mcp"]\n'
    '[launch]\nbefore = ["hub", "start", "--port", "{free_port}"]\n'
)
HUB = '[wake.hub]\ndiscovery = "{state_dir}/hub/discovery.json"\n'


def parse(text: str) -> Manifest:
    return parse_text(text, SOURCE)


def test_wake_hub_and_before_are_read_with_their_templates() -> None:
    manifest = parse(BASE + HUB)
    assert manifest.launch.before == ("hub", "start", "--port", "{free_port}")
    assert manifest.wake.hub is not None
    assert manifest.wake.hub.discovery == "{state_dir}/hub/discovery.json"
    shown = manifest.to_json()
    assert shown["wake"]["hub"] == {"discovery": "{state_dir}/hub/discovery.json"}
    assert shown["launch"]["before"] == ["hub", "start", "--port", "{free_port}"]
    plain = parse('id = "mine"\nname = "Mine"\nexecutable = "mine"\n')
    assert (plain.wake.hub, plain.launch.before) == (None, ())


@pytest.mark.parametrize(
    ("section", "key", "needle"),
    [
        ("[wake.hub]\n", "wake.hub.discovery", "required"),
        ('[wake.hub]\ndiscovery = "{nope}/d.json"\n', "wake.hub.discovery", "unknown placeholder"),
        ('[wake]\nhub = "d.json"\n', "wake.hub", "expected a table"),
    ],
)
def test_wake_hub_mistakes_name_the_key(section: str, key: str, needle: str) -> None:
    with pytest.raises(ManifestInvalid) as caught:
        parse(BASE + section)
    assert [(e.key, needle in e.message) for e in caught.value.errors] == [(key, True)]


def test_a_before_item_that_is_not_a_string_names_the_key() -> None:
    text = 'id = "mine"\nname = "Mine"\nexecutable = "mine"\n[launch]\nbefore = ["hub", 1]\n'
    with pytest.raises(ManifestInvalid) as caught:
        parse(text)
    assert [e.key for e in caught.value.errors] == ["launch.before[1]"]


def _command(tmp_path: Path, args: tuple[str, ...], *, headless: bool = False) -> HarnessCommand:
    values = wake_values(
        url="http://127.0.0.1:1", token="prl_x", token_file=str(tmp_path / "launch" / "t"),
        agent_id="agt_a", address="a@ws", alias="a", session_id="ses_s",
        state_dir=str(tmp_path), conversation_key="c1", implementation="mine",
    )  # fmt: skip
    directory = tmp_path / "launch"
    directory.mkdir(mode=0o700)
    spec = launch_spec(parse(BASE + HUB))
    return harness_command(spec, "/bin/mine", args, values, str(directory), {}, headless=headless)


def test_an_interactive_launch_gets_its_hub_knock_and_before_command(tmp_path: Path) -> None:
    """The `before` command is the harness's own program with the manifest's arguments,
    rendered like the rest (the same `{free_port}` as the environment would get); the knock
    reads the rendered discovery file and leaves its mark in the launch's directory."""
    command = _command(tmp_path, ("--model", "m"))
    assert command.argv == ("/bin/mine", "--model", "m")
    assert command.before[:3] == ("/bin/mine", "hub", "start")
    assert int(command.before[4]) > 0
    knock = command.knock
    assert isinstance(knock, HubKnock)
    assert list(knock.owners()) == []  # no process holds the (unused) credential `prl_x`
    assert knock.discovery == tmp_path / "hub" / "discovery.json"
    assert knock.mark_dir == tmp_path / "launch"
    assert knock.prompt == wake_prompt("a@ws")


@pytest.mark.parametrize(
    ("args", "headless"), [(("mcp", "list"), False), (("-p", "x"), True)], ids=["sub", "wake"]
)
def test_subcommands_and_wake_runs_get_no_hub_knock_nor_before(
    tmp_path: Path, args: tuple[str, ...], headless: bool
) -> None:
    command = _command(tmp_path, args, headless=headless)
    assert (command.knock, command.before) == (None, ())


# -- the knock against an in-process hub --------------------------------------------------------


class FakeHub:
    """Cline's hub protocol (v1) on 127.0.0.1 port 0, one session; `answer` decides replies."""

    def __init__(self, status: str = "idle", refuse: str | None = None) -> None:
        self.token = "hub-token"
        self.status, self.refuse = status, refuse
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self.refused = 0

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self.handle, listeners)

    async def handle(self, stream: trio.SocketStream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        async with stream:
            while data := await stream.receive_some(65536):
                ws.receive_data(data)
                for event in ws.events():
                    if isinstance(event, Request):
                        wanted = f"cline-hub-auth.{self.token}"
                        if wanted not in event.subprotocols:
                            self.refused += 1
                            await stream.send_all(ws.send(RejectConnection(status_code=401)))
                            return
                        await stream.send_all(ws.send(AcceptConnection(subprotocol=wanted)))
                    elif isinstance(event, TextMessage):
                        await stream.send_all(ws.send(TextMessage(self.reply(event.data))))
                    elif isinstance(event, CloseConnection):
                        return

    def reply(self, text: str) -> str:
        envelope = json.loads(text)["envelope"]
        name, payload = envelope["command"], envelope.get("payload") or {}
        self.commands.append((name, payload))
        answer: dict[str, Any] = {"version": "v1", "requestId": envelope["requestId"], "ok": True}
        if name == self.refuse:
            answer |= {"ok": False, "error": {"code": "nope", "message": "refused"}}
        elif name == "session.list":
            sessions = [
                {"sessionId": "old", "status": "completed", "updatedAt": 1,
                 "metadata": {"pid": TUI}},
                {"sessionId": "live", "status": self.status, "updatedAt": 2,
                 "metadata": {"pid": TUI}},
                # Kept in the user's data directory: another terminal's, updated last, and an
                # earlier launch's whose process is gone.
                {"sessionId": "elsewhere", "status": "idle", "updatedAt": 3,
                 "metadata": {"pid": OTHER}},
                {"sessionId": "gone", "status": "idle", "updatedAt": 4, "metadata": {}},
            ]  # fmt: skip
            answer["payload"] = {"sessions": sessions}
        return json.dumps({"kind": "reply", "envelope": answer})

    def discovery(self, path: Path, port: int, token: str | None = None) -> Path:
        url = f"ws://127.0.0.1:{port}/hub"
        path.write_text(json.dumps({"url": url, "authToken": token or self.token}))
        return path


async def _knock(
    tmp_path: Path, hub: FakeHub, prepare: Callable[[Path], None] = lambda _: None
) -> tuple[HubKnock, str]:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(hub.serve)
        knock = HubKnock(
            hub.discovery(tmp_path / "d.json", port), "[pager] knock", tmp_path, lambda: [TUI]
        )
        prepare(tmp_path)
        with trio.fail_after(10):
            try:
                outcome = await knock.knock_once()
            except HubError as exc:
                outcome = f"HubError: {exc}"
        nursery.cancel_scope.cancel()
    return knock, outcome


async def test_a_knock_queues_the_prompt_in_the_live_session_and_leaves_its_mark(
    tmp_path: Path,
) -> None:
    """The live session is the TUI's (its process holds the launch's credential), not one
    kept in the user's data directory that another terminal runs and updated later."""
    hub = FakeHub()
    _, outcome = await _knock(tmp_path, hub)
    assert outcome == "sent"
    assert hub.commands[-1] == (
        "session.send_input",
        {"sessionId": "live", "prompt": "[pager] knock", "delivery": "queue"},
    )
    assert has_mark(tmp_path)
    assert os.stat(tmp_path / MARK).st_mode & 0o777 == 0o600


async def test_no_session_of_the_launchs_gets_no_knock(tmp_path: Path) -> None:
    """Before the TUI's first run, the hub lists only other processes' sessions: the knock
    sends nothing (it would run in another conversation)."""
    hub = FakeHub()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(hub.serve)
        discovery = hub.discovery(tmp_path / "d.json", port)
        knock = HubKnock(discovery, "[pager] knock", tmp_path, lambda: [1])
        with trio.fail_after(10):
            outcome = await knock.knock_once()
        nursery.cancel_scope.cancel()
    assert outcome.startswith("no session of the launch's")
    assert [name for name, _ in hub.commands] == ["session.list"]
    assert not has_mark(tmp_path)


async def test_a_busy_session_with_a_knock_queued_gets_no_second_one(tmp_path: Path) -> None:
    """The earlier knock's turn has not begun (its mark is there) and the session runs a
    turn: the queued knock will run after it; another would only add a turn."""
    hub = FakeHub(status="running")
    _, outcome = await _knock(tmp_path, hub, lambda d: (d / MARK).touch())
    assert outcome == "a knock is queued already"
    assert [name for name, _ in hub.commands] == ["session.list"]


async def test_a_busy_session_without_a_pending_knock_gets_one_queued(tmp_path: Path) -> None:
    hub = FakeHub(status="running")
    _, outcome = await _knock(tmp_path, hub)
    assert outcome == "sent"
    assert hub.commands[-1][0] == "session.send_input"


async def test_a_refused_knock_takes_its_mark_back(tmp_path: Path) -> None:
    """No turn of the knock's will begin: a mark left would make the next typed prompt pass
    as the knock's."""
    hub = FakeHub(refuse="session.send_input")
    _, outcome = await _knock(tmp_path, hub)
    assert outcome.startswith("HubError: the hub refused session.send_input")
    assert not has_mark(tmp_path)


async def test_a_hub_refuses_a_client_without_its_token(tmp_path: Path) -> None:
    hub = FakeHub()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(hub.serve)
        discovery = hub.discovery(tmp_path / "d.json", port, token="guessed")
        knock = HubKnock(discovery, "[pager] knock", tmp_path, lambda: [TUI])
        with trio.fail_after(10), pytest.raises(HubError, match="refused the connection"):
            await knock.knock_once()
        nursery.cancel_scope.cancel()
    assert (hub.refused, hub.commands) == (1, [])  # the token is the hub's only check
    assert not has_mark(tmp_path)


async def test_a_discovery_file_naming_another_host_gets_no_token(tmp_path: Path) -> None:
    """The token goes only to a loopback ws:// hub, whatever the discovery file says."""
    discovery = tmp_path / "d.json"
    discovery.write_text(json.dumps({"url": "ws://192.0.2.1:9/hub", "authToken": "t"}))
    with trio.fail_after(10), pytest.raises(HubError, match="not a loopback"):
        await HubKnock(discovery, "[pager] knock", tmp_path, lambda: [TUI]).knock_once()


async def test_knocks_run_one_at_a_time_and_failures_are_not_the_launchs(tmp_path: Path) -> None:
    """`run` sends each asked-for knock; no hub (no discovery file yet) is an outcome, not an
    error of the launch."""
    knock = HubKnock(tmp_path / "missing.json", "[pager] knock", tmp_path, lambda: [TUI])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(knock.run)
        knock.knock()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert knock.outcome is not None
    assert knock.outcome.startswith("failed: no hub discovery file")
