"""Parsing the `/v1` JSON leniently, "3m ago", and the table's rows and sections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pager.tui.model import ago, parse_messages, parse_snapshot, wake_notice
from pager.tui.rows import MARK, table_rows

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def _agent(alias: str, **fields: object) -> dict[str, object]:
    return {
        "agent_id": f"agt_{alias}",
        "alias": alias,
        "address": f"{alias}@ws",
        "implementation": "shell",
        "durable": True,
        "archived": False,
        "attached": False,
        "inbox": {"queued": 0, "claimed": 0, "dead": 0},
        "last_seen": (NOW - timedelta(minutes=3)).isoformat(),
        **fields,
    }


def test_parse_snapshot_orders_workspaces_and_agents_and_ignores_unknown_fields() -> None:
    """Workspaces by slug, agents by alias; extra fields and missing optional ones are fine."""
    snapshot = parse_snapshot(
        {
            "broker": {"pid": 7, "version": "1.2", "future": True},
            "workspaces": [
                {"slug": "web-2", "path": "/w", "agents": [_agent("zed"), _agent("amy")]},
                {"slug": "api-1", "path": "/a", "agents": []},
            ],
            "totals": {"agents": 2},
            "seq": 41,
            "something_new": [],
        }
    )
    assert [ws.slug for ws in snapshot.workspaces] == ["api-1", "web-2"]
    assert [agent.alias for agent in snapshot.workspaces[1].agents] == ["amy", "zed"]
    assert snapshot.workspaces[1].agents[0].workspace == "web-2"
    assert snapshot.seq == 41
    assert snapshot.broker.pid == 7


def test_parse_messages_reads_parties_states_and_cursor() -> None:
    """The peer of an incoming message is its sender; of an outgoing one, its recipient."""
    page = parse_messages(
        {
            "messages": [
                {
                    "message_id": "msg_1",
                    "direction": "in",
                    "sender": {"agent_id": "agt_a", "alias": "a", "address": "a@ws"},
                    "recipient": {"agent_id": "agt_b", "alias": "b", "address": "b@ws"},
                    "body": "hi",
                    "state": "dead",
                    "attempts": 3,
                    "dead_reason": "expired",
                }
            ],
            "next_cursor": "c2",
        }
    )
    [message] = page.messages
    assert message.peer.label == "a@ws"
    assert (message.state, message.attempts, message.dead_reason) == ("dead", 3, "expired")
    assert page.next_cursor == "c2"


def test_ago_formats_minutes_hours_days() -> None:
    """The largest whole unit; `just now` under a minute; `-` when unknown or unreadable."""
    assert ago(None, NOW) == "-"
    assert ago("not a time", NOW) == "-"
    assert ago((NOW - timedelta(seconds=1)).isoformat(), NOW) == "just now"
    assert ago((NOW - timedelta(seconds=59)).isoformat(), NOW) == "just now"
    assert ago((NOW + timedelta(seconds=3)).isoformat(), NOW) == "just now"  # clock skew
    assert ago((NOW - timedelta(minutes=3, seconds=59)).isoformat(), NOW) == "3m ago"
    assert ago((NOW - timedelta(hours=5)).isoformat(), NOW) == "5h ago"
    assert ago((NOW - timedelta(days=9)).isoformat(), NOW) == "9d ago"
    assert ago("2026-05-01T11:59:00Z", NOW) == "1m ago"


def test_table_rows_put_archived_agents_in_a_section_per_workspace() -> None:
    """Heading, active agents, then `archive (n)` and the archived agents, per workspace."""
    snapshot = parse_snapshot(
        {
            "workspaces": [
                {
                    "slug": "api-1",
                    "path": "/a",
                    "agents": [
                        _agent("old", archived=True),
                        _agent("bob", inbox={"queued": 2, "claimed": 1, "dead": 1}),
                        _agent("amy", attached=True, durable=False),
                    ],
                },
                {"slug": "web-2", "path": "/w", "agents": []},
            ]
        }
    )
    rows = table_rows(snapshot, NOW, {"agt_bob"})
    assert [row.key for row in rows] == [
        "ws:api-1",
        "agt_amy",
        "agt_bob",
        "archive:api-1",
        "agt_old",
        "ws:web-2",
        "empty:web-2",
    ]
    heading = [str(cell) for cell in rows[0].cells]
    assert heading[1:8] == ["api-1", "2 agents", "", "1 on", "2", "1", "1"]
    amy, bob = ([str(cell) for cell in row.cells] for row in rows[1:3])
    assert amy[:5] == ["", "  amy (ephemeral)", "shell", "", "yes"]
    assert bob[0] == MARK
    assert bob[5:9] == ["2", "1", "1", "3m ago"]
    assert rows[3].agent_id is None
    assert rows[4].agent_id == "agt_old"


def test_only_removed_detects_pure_removals() -> None:
    """Rows only taken out (order kept) are removed in place; anything else is a rebuild."""
    from pager.tui.app import _only_removed

    before = ["ws:a", "agt_1", "agt_2", "ws:b", "agt_3"]
    assert _only_removed(before, ["ws:a", "agt_2", "ws:b"])
    assert not _only_removed(before, before)
    assert not _only_removed(before, ["ws:a", "agt_2", "agt_1"])  # reordered
    assert not _only_removed(before, ["ws:a", "agt_9"])  # a new row


def test_an_agent_row_names_its_host_and_says_when_it_is_down() -> None:
    """With a store several brokers share (SPEC §13): each agent's host; a host whose broker
    stopped beating is marked down."""
    snapshot = parse_snapshot(
        {
            "workspaces": [
                {
                    "slug": "api-1",
                    "path": "/src/api",
                    "agents": [
                        {"agent_id": "agt_a", "alias": "a", "host": "laptop", "durable": True},
                        {
                            "agent_id": "agt_b",
                            "alias": "b",
                            "host": "buildvm",
                            "host_alive": False,
                            "durable": True,
                        },
                    ],
                }
            ]
        }
    )
    rows = {row.key: [str(cell) for cell in row.cells] for row in table_rows(snapshot, NOW, set())}
    assert rows["agt_a"][3] == "laptop"
    assert rows["agt_b"][3] == "buildvm (down)"


def test_an_agent_row_says_launch_on_mail_and_a_run_going() -> None:
    """`(wake on)` after the alias of an agent with launch on mail on; `run` in the attached
    column while a wake run of it goes (docs/wake.md)."""
    agents = [
        {"agent_id": "agt_a", "alias": "a", "durable": True, "wake": True},
        {"agent_id": "agt_b", "alias": "b", "durable": True, "wake": True, "waking": True,
         "attached": True},
        {"agent_id": "agt_c", "alias": "c", "durable": True, "attached": True},
    ]  # fmt: skip
    snapshot = parse_snapshot({"workspaces": [{"slug": "api-1", "path": "/a", "agents": agents}]})
    rows = {row.key: [str(cell) for cell in row.cells] for row in table_rows(snapshot, NOW, set())}
    assert (rows["agt_a"][1], rows["agt_a"][4]) == ("  a (wake on)", "no")
    assert (rows["agt_b"][1], rows["agt_b"][4]) == ("  b (wake on)", "run")
    assert (rows["agt_c"][1], rows["agt_c"][4]) == ("  c", "yes")


def test_wake_notice_tells_each_wake_event() -> None:
    base = {"address": "bot@api-1", "agent_id": "agt_b"}
    assert (
        wake_notice("wake.started", {**base, "pid": 42}) == "bot@api-1: wake run started (pid 42)"
    )
    ended = {**base, "outcome": "timed_out", "exit_code": 137, "duration_s": 600.0,
             "acknowledged": ["msg_1"]}  # fmt: skip
    assert wake_notice("wake.ended", ended) == (
        "bot@api-1: wake run timed out (status 137) after 600.0 s, 1 message(s) acknowledged"
    )
    deferred = {**base, "retry_after_s": 12, "reason": "4 wake runs in the last hour"}
    assert wake_notice("wake.deferred", deferred) == (
        "bot@api-1: wake run put off 12 s: 4 wake runs in the last hour"
    )
    assert wake_notice("wake.enabled", base) is None
    assert wake_notice("wake.ended", "not an object") is None
