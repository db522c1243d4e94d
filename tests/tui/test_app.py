"""The TUI driven by Textual's pilot against the FAKE operator API (tests/fakes/
fake_operator_api.py): layout, live updates, actions, reconnection, paging, the install menu.
The same behaviours against a real broker are in test_app_broker.py."""

from __future__ import annotations

import pytest
from textual.binding import Binding

from pager.tui.app import AgentsTable, PagerApp
from pager.tui.confirm import ConfirmScreen
from pager.tui.help import HINTS, HelpScreen
from pager.tui.install_menu import InstallMenu
from pager.tui.installs import InstallChoice, InstallResult, describe
from pager.tui.messages import MessagesScreen
from pager.tui.rows import EMPTY_HINT
from pager.tui.source import HttpSource
from tests.fakes.fake_operator_api import FakeOperatorApi, running_api
from tests.tui.pilot import (
    SIZE,
    fast_backoff,
    move_to,
    row_keys,
    run,
    screen_lines,
    shown_aliases,
    until,
)


def _app(api: FakeOperatorApi, **options: object) -> PagerApp:
    return PagerApp(HttpSource.fixed(api.url, api.secret), backoff=fast_backoff(), **options)  # type: ignore[arg-type]


def test_app_shows_workspaces_agents_and_archive_sections() -> None:
    """Each workspace heading is followed by its agents, then its archive section."""
    with running_api() as api:
        alice = api.add_agent("api-111111", "alice", implementation="claude", attached=True)
        api.add_agent("web-222222", "bob", queued=2)
        carol = api.add_agent("web-222222", "carol", archived=True)

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                assert shown_aliases(app) == [
                    "api-111111",
                    "alice",
                    "web-222222",
                    "bob",
                    "archive (1)",
                    "carol",
                ]
                row = app.table.get_row(alice)
                assert [str(cell) for cell in row[2:6]] == ["claude", "", "yes", "0"]
                assert str(app.table.get_row(carol)[9]) == "carol@web-222222"
                assert app.connection == "live"

        run(scenario)


def test_app_updates_live_when_a_message_is_queued() -> None:
    """A message queued for bob shows in his waiting count without pressing refresh."""
    with running_api() as api:
        alice = api.add_agent("api-111111", "alice")
        bob = api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.connection == "live", "the stream")
                assert str(app.table.get_row(bob)[5]) == "0"
                api.queue_message(alice, bob, "hello")
                await until(pilot, lambda: str(app.table.get_row(bob)[5]) == "1", "bob's count")

        run(scenario)


def test_app_refreshes_at_most_five_times_a_second_under_a_burst() -> None:
    """Fifty events at once cause a few snapshot reads, not fifty."""
    with running_api() as api:
        alice = api.add_agent("api-111111", "alice")
        bob = api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.connection == "live", "the stream")
                before = app.snapshots_applied
                with api.lock:  # one burst
                    for index in range(50):
                        api.queue_message(alice, bob, f"message {index}")
                await until(pilot, lambda: app.events_seen >= 50, "the events")
                await until(
                    pilot, lambda: str(app.table.get_row(bob)[5]) == "50", "the final count"
                )
                await until(pilot, lambda: not app.gate.busy, "the last refresh")
                # Coalesced: a handful of reads for fifty events. The pacing itself (at most
                # one read per 0.2 s) is RefreshGate's, tested on a given clock in test_live.
                assert app.snapshots_applied - before <= 10

        run(scenario)


def test_app_archive_with_confirmation_moves_the_agent_to_the_archive() -> None:
    """`a` names the agent in a dialog; `y` archives it into its workspace's archive section."""
    with running_api() as api:
        api.add_agent("api-111111", "alice")
        bob = api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("a")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
                assert isinstance(app.screen, ConfirmScreen)
                assert any("bob@api-111111" in name for name in app.screen.names)
                await pilot.press("y")
                await until(
                    pilot, lambda: "archive:api-111111" in row_keys(app), "the archive section"
                )
                keys = row_keys(app)
                assert keys.index(bob) > keys.index("archive:api-111111")
                assert api.agents[bob]["archived"] is True

        run(scenario)


def test_app_archive_cancelled_changes_nothing() -> None:
    """Escape in the dialog sends nothing to the broker."""
    with running_api() as api:
        bob = api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("a")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
                assert not [r for r in api.requests if r[0] == "POST"]
                assert api.agents[bob]["archived"] is False

        run(scenario)


def test_app_purge_of_marked_agents_names_them_and_removes_them() -> None:
    """Space marks two agents; `p` lists both in the dialog; `y` purges exactly those two."""
    with running_api() as api:
        alice = api.add_agent("api-111111", "alice")
        bob = api.add_agent("api-111111", "bob")
        carol = api.add_agent("web-222222", "carol", archived=True)

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("space")
                await move_to(pilot, app, carol)
                await pilot.press("space")
                assert app.marked == {bob, carol}
                await pilot.press("p")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
                assert isinstance(app.screen, ConfirmScreen)
                assert app.screen.question == "Purge 2 agents?"
                assert [name.split()[0] for name in app.screen.names] == [
                    "bob@api-111111",
                    "carol@web-222222",
                ]
                await pilot.press("y")
                await until(pilot, lambda: bob not in row_keys(app), "bob gone")
                await until(pilot, lambda: carol not in row_keys(app), "carol gone")
                assert alice in row_keys(app)
                assert set(api.agents) == {alice}
                assert app.marked == set()

        run(scenario)


def test_app_reports_refused_actions() -> None:
    """A 409 from the broker is reported per agent; the agent stays where it was."""
    with running_api() as api:
        bob = api.add_agent("api-111111", "bob")
        api.refuse["archive"] = (409, "conflict")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("a", "y")
                await until(pilot, lambda: app.last_action is not None, "the action")
                assert app.last_action is not None
                [(agent, reason)] = app.last_action.failed
                assert agent.agent_id == bob
                assert "conflict" in reason
                assert "archive:api-111111" not in row_keys(app)

        run(scenario)


def test_app_reconnects_when_the_broker_comes_back() -> None:
    """The API stops (closing) and starts again on the same port: reconnecting…, then the
    snapshot and the stream again, with changes made meanwhile."""
    with running_api() as api:
        alice = api.add_agent("api-111111", "alice")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.connection == "live", "the stream")
                api.stop()
                await until(pilot, lambda: app.connection == "reconnecting", "reconnecting")
                assert "reconnecting…" in str(app.query_one("#status").render())
                dave = api.add_agent("api-111111", "dave")
                api.start()
                await until(pilot, lambda: app.connection == "live", "live again")
                await until(pilot, lambda: dave in row_keys(app), "dave")
                assert alice in row_keys(app)
                api.queue_message(alice, dave, "after the restart")
                await until(pilot, lambda: str(app.table.get_row(dave)[5]) == "1", "live")

        run(scenario)


def test_app_reconnects_after_an_abrupt_drop() -> None:
    """A stream cut without `closing` (a killed broker) is also followed by a reconnection."""
    with running_api(chunked=False) as api:
        api.add_agent("api-111111", "alice")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.connection == "live", "the stream")
                api.stop(graceful=False)
                await until(pilot, lambda: app.connection == "reconnecting", "reconnecting")
                api.start()
                await until(pilot, lambda: app.connection == "live", "live again")

        run(scenario)


@pytest.mark.parametrize("frame", ["reset", "overflow"])
def test_app_follows_events_from_the_snapshot_seq_and_resyncs(frame: str) -> None:
    """The stream is opened with Last-Event-ID = the snapshot's seq; `reset` and `overflow`
    make it read the snapshot again and reopen the stream from the new seq."""
    with running_api() as api:
        api.add_agent("api-111111", "alice")
        api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:

                def streams() -> list[str | None]:
                    return [r[2] for r in api.requests if r[1] == "/v1/events"]

                await until(pilot, lambda: streams(), "the stream")
                assert streams() == ["2"]
                api.next_stream_opens_with = frame
                reads = app.snapshots_applied
                api.stop()
                api.start()
                await until(pilot, lambda: len(streams()) == 3, f"a stream after the {frame}")
                assert app.resyncs == 1
                assert streams() == ["2", "2", "2"]
                api.emit("agent.renamed")
                await until(pilot, lambda: app.events_seen == 1, "an event on the new stream")
                assert app.snapshots_applied >= reads + 2  # after the restart, after the frame

        run(scenario)


def test_messages_screen_pages_filters_and_shows_details() -> None:
    """Enter opens bob's messages (newest first, with states); `n`/`b` page; `d` filters."""
    with running_api() as api:
        alice = api.add_agent("api-111111", "alice")
        bob = api.add_agent("api-111111", "bob")
        for index in range(5):
            api.queue_message(alice, bob, f"note {index}")
        api.queue_message(bob, alice, "reply from bob\nsecond line")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("enter")
                await until(pilot, lambda: isinstance(app.screen, MessagesScreen), "the view")
                screen = app.screen
                assert isinstance(screen, MessagesScreen)
                screen.page_size = 4
                screen.reload()
                await until(pilot, lambda: screen.page is not None and screen.loads >= 2, "p1")
                assert screen.page is not None
                assert [m.body.split()[0] for m in screen.page.messages] == [
                    "reply",
                    "note",
                    "note",
                    "note",
                ]
                assert screen.page.messages[0].direction == "out"
                assert screen.page.messages[1].state == "queued"
                assert "second line" in str(screen.query_one("#detail").render())
                await pilot.press("n")
                await until(pilot, lambda: screen.page_number == 2 and screen.loads >= 3, "p2")
                assert [m.body for m in screen.page.messages] == ["note 1", "note 0"]
                await pilot.press("b")
                await until(pilot, lambda: screen.page_number == 1 and screen.loads >= 4, "p1")
                await pilot.press("d")  # both -> in
                await until(pilot, lambda: screen.loads >= 5, "incoming only")
                assert screen.page is not None
                assert {m.direction for m in screen.page.messages} == {"in"}
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, MessagesScreen), "back")

        run(scenario)


def test_install_menu_lists_plugin_harnesses_and_shows_what_was_written() -> None:
    """`m` lists the skill and every harness offering a plugin; choosing one shows its files."""
    ran: list[InstallChoice] = []

    def runner(choice: InstallChoice) -> InstallResult:
        ran.append(choice)
        report = {"files": [{"path": "/home/x/.claude/plugins/pager", "status": "written"}]}
        result = InstallResult(choice, 0, report, "")
        result.lines = describe(result)
        return result

    with running_api() as api:

        async def scenario() -> None:
            app = _app(api, install_runner=runner)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("m")
                await until(pilot, lambda: isinstance(app.screen, InstallMenu), "the menu")
                menu = app.screen
                assert isinstance(menu, InstallMenu)
                await until(pilot, lambda: menu.choices, "the choices")
                keys = [choice.key for choice in menu.choices]
                assert keys[0] == "skill"
                assert {"plugin-claude", "plugin-codex"} <= set(keys)
                menu.query_one("#choices").highlighted = keys.index("plugin-claude")  # type: ignore[attr-defined]
                await pilot.press("enter")
                await until(pilot, lambda: menu.results, "the result")
                assert ran[0].args[:3] == ("plugin", "install", "claude")
                shown = str(menu.query_one("#result").render())
                assert "written" in shown
                assert "/home/x/.claude/plugins/pager" in shown
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, InstallMenu), "closed")

        run(scenario)


def test_app_purge_warning_is_whole_at_80_columns() -> None:
    """The purge dialog wraps its warning instead of cutting it (issue 11, item 7)."""
    with running_api() as api:
        bob = api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=(80, 24)) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("p")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
                await pilot.pause()
                warning = app.screen.query_one("#warning")
                lines = [
                    "".join(segment.text for segment in strip)
                    for strip in warning.render_lines(warning.region.reset_offset)
                ]
                shown = " ".join(line.strip() for line in lines)
                assert "becomes dead letters. This cannot be undone." in shown
                assert warning.region.height >= 2  # wrapped, not cut

        run(scenario)


def test_app_question_mark_shows_every_key_and_how_to_add_a_session() -> None:
    with running_api() as api:

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await pilot.press("question_mark")
                await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
                assert isinstance(app.screen, HelpScreen)
                for key in ("q", "?", "space", "a", "u", "p", "m", "r", "⏎"):
                    assert f"  {key} " in app.screen.keys, key
                assert "pager claude" in HINTS
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "closed")

        run(scenario)


def test_app_empty_broker_says_how_to_add_an_agent() -> None:
    with running_api() as api:

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                assert row_keys(app) == ["empty"]
                cells = [str(cell) for cell in app.table.get_row("empty")]
                assert EMPTY_HINT in cells

        run(scenario)


def test_help_line_keeps_quit_and_help_at_80_columns() -> None:
    from pager.tui.app import AgentsTable
    from pager.tui.keyhelp import help_text

    shown = help_text([*PagerApp.BINDINGS, *AgentsTable.BINDINGS]).plain[:80]
    assert " q  quit" in shown
    assert " ?  help" in shown


def test_app_at_120_columns_shows_its_whole_status_and_every_key() -> None:
    """A terminal of 120 columns shows the whole status line and every key of the help line
    (wrapped onto a second line, never cut), and `?` also names the table's own keys."""
    with running_api() as api:
        api.add_agent("api-111111", "alice", implementation="claude", attached=True)

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=(120, 30)) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await pilot.pause()
                shown = " ".join(" ".join(screen_lines(app)).split())
                assert "waiting 0, claimed 0, dead 0" in shown
                for binding in [*PagerApp.BINDINGS, *AgentsTable.BINDINGS]:
                    if isinstance(binding, Binding) and binding.show:
                        assert f" {binding.description}" in shown, binding.description
                await pilot.press("question_mark")
                await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
                assert isinstance(app.screen, HelpScreen)
                for key in ("↑ ↓", "PgUp PgDn", "esc"):
                    assert f"  {key} " in app.screen.keys, key

        run(scenario)


def test_app_wake_on_and_off_with_confirmation() -> None:
    """`w` turns launch on mail on after a dialog that says what it risks; the row shows
    `(wake on)`; `W` turns it off."""
    with running_api() as api:
        bob = api.add_agent("api-111111", "bob")

        async def scenario() -> None:
            app = _app(api)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: app.snapshot is not None, "the first snapshot")
                await move_to(pilot, app, bob)
                await pilot.press("w")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
                assert isinstance(app.screen, ConfirmScreen)
                assert "docs/wake.md" in app.screen.warning
                await pilot.press("y")
                await until(pilot, lambda: api.agents[bob].get("wake") is True, "wake on")
                await until(pilot, lambda: _alias_cell(app, bob).endswith("(wake on)"), "the row")
                await pilot.press("W")
                await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
                await pilot.press("y")
                await until(pilot, lambda: api.agents[bob].get("wake") is False, "wake off")

        run(scenario)


def _alias_cell(app: PagerApp, key: str) -> str:
    return str(app.table.get_row(key)[1])
