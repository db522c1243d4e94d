"""Acceptance: the TUI, driven by Textual's pilot, against a real broker (`pager start` in a
private PAGER_HOME), real HTTP, identities registered with the local secret and mail sent over
MCP."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable

from pager.config import default_host_name
from pager.launch.discovery import discover
from pager.launch.paths import StatePaths
from pager.tui.app import PagerApp
from pager.tui.confirm import ConfirmScreen
from pager.tui.messages import MessagesScreen
from pager.tui.source import HttpSource, state_dir_locator
from tests.tui.conftest import RealBroker
from tests.tui.pilot import SIZE, fast_backoff, move_to, row_keys, run, shown_aliases, until


def _app(broker: RealBroker) -> PagerApp:
    paths = StatePaths(broker.home.root)
    found = discover(paths).broker
    assert found is not None
    locate = state_dir_locator(paths, found)
    return PagerApp(HttpSource(locate), backoff=fast_backoff())


def _waiting(app: PagerApp, agent_id: str) -> str:
    return str(app.table.get_row(agent_id)[5])


def test_broker_tui_shows_the_agents_of_two_workspaces(real_broker: RealBroker) -> None:
    """alice in one repository, bob and carol in another: two headings, each with its agents."""
    alice = real_broker.register(real_broker.workspace("api"), "alice")
    bob = real_broker.register(real_broker.workspace("web"), "bob")
    carol = real_broker.register(real_broker.workspace("web"), "carol")

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
            api_slug = alice["address"].split("@")[1]
            web_slug = bob["address"].split("@")[1]
            assert api_slug.startswith("api-")
            assert web_slug.startswith("web-")
            assert shown_aliases(app) == [api_slug, "alice", web_slug, "bob", "carol"]
            keys = row_keys(app)
            assert keys == [
                f"ws:{api_slug}",
                alice["agent_id"],
                f"ws:{web_slug}",
                bob["agent_id"],
                carol["agent_id"],
            ]
            row = [str(cell) for cell in app.table.get_row(alice["agent_id"])]
            # The broker names its host for each agent (one store, one host: always up).
            assert row[2] == "shell"
            assert row[3] == default_host_name()
            assert row[4:6] == ["yes", "0"]
            assert row[9] == alice["address"]

    run(scenario)


def test_broker_tui_updates_when_a_message_is_sent(real_broker: RealBroker) -> None:
    """alice sends bob two messages over MCP: bob's waiting count follows without a key press,
    and his message view lists them as queued."""
    workspace = real_broker.workspace("api")
    alice = real_broker.register(workspace, "alice")
    bob = real_broker.register(workspace, "bob")

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.connection == "live", "the event stream")
            assert _waiting(app, bob["agent_id"]) == "0"
            await asyncio.to_thread(real_broker.send, alice, "bob", "the parser is yours now")
            await until(pilot, lambda: _waiting(app, bob["agent_id"]) == "1", "one waiting")
            await asyncio.to_thread(real_broker.send, alice, "bob", "and the lexer")
            await until(pilot, lambda: _waiting(app, bob["agent_id"]) == "2", "two waiting")
            await move_to(pilot, app, bob["agent_id"])
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, MessagesScreen), "the view")
            screen = app.screen
            assert isinstance(screen, MessagesScreen)
            await until(pilot, lambda: screen.page is not None, "the first page")
            assert screen.page is not None
            assert [(m.body, m.state, m.direction) for m in screen.page.messages] == [
                ("and the lexer", "queued", "in"),
                ("the parser is yours now", "queued", "in"),
            ]
            assert screen.page.messages[0].sender.address == alice["address"]

    run(scenario)


def test_broker_tui_archive_with_confirmation_moves_the_agent(real_broker: RealBroker) -> None:
    """`a` then `y` on bob: the broker archives him and he shows in the archive section."""
    workspace = real_broker.workspace("api")
    alice = real_broker.register(workspace, "alice")
    bob = real_broker.register(workspace, "bob")
    slug = bob["address"].split("@")[1]

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
            await move_to(pilot, app, bob["agent_id"])
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.names[0].startswith(bob["address"])
            await pilot.press("y")
            await until(pilot, lambda: f"archive:{slug}" in row_keys(app), "the archive section")
            keys = row_keys(app)
            assert keys == [f"ws:{slug}", alice["agent_id"], f"archive:{slug}", bob["agent_id"]]
            assert app.snapshot is not None
            assert app.snapshot.agents()[bob["agent_id"]].archived
            assert app.last_action is not None
            assert not app.last_action.failed

    run(scenario)


def test_broker_tui_purge_of_several_marked_agents(real_broker: RealBroker) -> None:
    """Space marks bob and carol, `p` names both, `y` purges them; alice stays."""
    workspace = real_broker.workspace("api")
    alice = real_broker.register(workspace, "alice")
    bob = real_broker.register(workspace, "bob")
    carol = real_broker.register(workspace, "carol")

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
            await move_to(pilot, app, bob["agent_id"])
            await pilot.press("space")  # marks bob, moves down to carol
            await pilot.press("space")
            assert app.marked == {bob["agent_id"], carol["agent_id"]}
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.question == "Purge 2 agents?"
            assert [name.split()[0] for name in app.screen.names] == [
                bob["address"],
                carol["address"],
            ]
            await pilot.press("y")
            gone = {bob["agent_id"], carol["agent_id"]}
            await until(pilot, lambda: not gone & set(row_keys(app)), "both purged")
            assert alice["agent_id"] in row_keys(app)
            assert app.last_action is not None
            assert not app.last_action.failed

    run(scenario)


def test_broker_tui_survives_a_broker_restart(real_broker: RealBroker) -> None:
    """`pager restart` while the TUI runs: it reconnects, shows the agents again, and follows
    the new broker's events."""
    workspace = real_broker.workspace("api")
    alice = real_broker.register(workspace, "alice")
    bob = real_broker.register(workspace, "bob")

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.connection == "live", "the event stream")
            assert app.snapshot is not None
            first_pid = app.snapshot.broker.pid
            restarted = await asyncio.to_thread(real_broker.home.run, "restart")
            assert restarted.returncode == 0, restarted.stderr
            await until(pilot, lambda: app.reconnects >= 1, "the dropped stream")
            await until(
                pilot,
                lambda: (
                    app.connection == "live"
                    and app.snapshot is not None
                    and app.snapshot.broker.pid != first_pid
                ),
                "the new broker",
            )
            assert {alice["agent_id"], bob["agent_id"]} <= set(row_keys(app))
            # alice's session (and its token) outlived the broker
            await asyncio.to_thread(real_broker.send, alice, "bob", "after the restart")
            await until(pilot, lambda: _waiting(app, bob["agent_id"]) == "1", "live again")

    run(scenario)


#: Sets the window title, clears the screen, hides text, rewrites the line, reverses text.
HOSTILE = "ok\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\rfake \u202eevil\x9b31m end\nline two"


def test_broker_tui_shows_a_hostile_message_escaped(real_broker: RealBroker) -> None:
    """Another agent's session sends bob terminal escapes, CR and a bidi override: the
    message view's row and detail show them as `\\x1b`, `\\r`, `⟨U+202E⟩`, never raw."""
    workspace = real_broker.workspace("api")
    mallory = real_broker.register(workspace, "mallory")
    bob = real_broker.register(workspace, "bob")
    real_broker.send(mallory, "bob", HOSTILE)

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.connection == "live", "the event stream")
            await until(pilot, lambda: _waiting(app, bob["agent_id"]) == "1", "one waiting")
            await move_to(pilot, app, bob["agent_id"])
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, MessagesScreen), "the view")
            screen = app.screen
            assert isinstance(screen, MessagesScreen)
            await until(pilot, lambda: screen.page is not None, "the first page")
            assert screen.page is not None
            [message] = screen.page.messages
            assert message.body == HOSTILE  # the data stays exact; only what is shown escapes
            table = screen.query_one("#messages", DataTable)
            preview = str(table.get_row(message.message_id)[-1])
            detail = str(screen.query_one("#detail").render())
            for shown in (preview, detail):
                assert not {"\x1b", "\x07", "\r", "\x9b", "\u202e"} & set(shown), shown
                assert "ok\\x1b]0;owned\\x07\\x1b[2J" in shown
            assert "hidden\\rfake ⟨U+202E⟩evil\\x9b31m end\nline two" in detail

    run(scenario)


def test_broker_tui_breaks_an_agents_reservations(real_broker: RealBroker) -> None:
    """`b` then `y` on alice, who reserved `src/**`: the broker ends her reservation (the
    operator's break, docs/reservations.md), and her row shows none; bob, holding none, is
    not asked about."""
    from pager.client import request_json

    workspace = real_broker.workspace("api")
    alice = real_broker.register(workspace, "alice")
    real_broker.register(workspace, "bob")
    status, made = request_json(
        real_broker.url,
        "POST",
        "/v1/me/reservations",
        token=alice["token"],
        body={"paths": ["src/**"], "reason": "refactor"},
        timeout=30,
    )
    assert status == 200, made
    held = made["reserved"][0]["id"]

    def active() -> list[str]:
        status, listed = request_json(
            real_broker.url, "GET", "/v1/reservations", token=real_broker.secret, timeout=30
        )
        assert status == 200, listed
        return [item["id"] for item in listed["reservations"] if item["state"] == "active"]

    assert active() == [held]

    async def scenario() -> None:
        app = _app(real_broker)
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: (
                    app.snapshot is not None
                    and app.snapshot.agents()[alice["agent_id"]].reservation_ids == (held,)
                ),
                "alice's reservation in the table",
            )
            await move_to(pilot, app, alice["agent_id"])
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.names[0].startswith(alice["address"])
            await pilot.press("y")
            await until(
                pilot,
                lambda: app.last_action is not None and bool(app.last_action.done),
                "the break done",
            )
            assert app.last_action is not None
            assert not app.last_action.failed

    run(scenario)
    assert active() == []
