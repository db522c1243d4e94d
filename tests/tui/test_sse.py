"""The TUI's SSE reader: the line protocol (the shared `pager.sse` parser), chunked and
close-delimited streams, refusals, drops."""

from __future__ import annotations

import asyncio

import pytest

from pager.sse import SseParser
from pager.tui.errors import ApiError, Unreachable
from pager.tui.source import HttpSource
from pager.tui.sse import SseEvent, stream_events
from tests.fakes.fake_operator_api import running_api
from tests.ports import refused_port
from tests.tui.pilot import run


def _parse(lines: list[str]) -> list[SseEvent]:
    parser = SseParser()
    return [event for line in lines if (event := parser.feed_line(line)) is not None]


def test_sse_parser_reads_id_event_and_multiline_data_and_skips_comments() -> None:
    """Fields up to a blank line make one event; comments and unknown fields are ignored."""
    events = _parse(
        [
            ": heartbeat",
            "",
            "id: 7",
            "event: message.queued",
            'data: {"a":',
            "data: 1}",
            "retry: 100",
            "",
            "data:plain",
            "",
        ]
    )
    assert events == [
        SseEvent("7", "message.queued", '{"a":\n1}', 100),
        SseEvent(None, "message", "plain"),
    ]
    assert events[0].json() == {"a": 1}


@pytest.mark.parametrize("chunked", [True, False])
def test_stream_events_resumes_after_last_event_id(chunked: bool) -> None:
    """With Last-Event-ID 1 the stream replays 2 and 3 in order, then live ones."""
    with running_api(chunked=chunked) as api:
        for kind in ("agent.created", "agent.renamed", "agent.moved"):
            api.emit(kind)

        async def scenario() -> None:
            stream = stream_events(api.url, "/v1/events", token=api.secret, last_event_id=1)
            seen: list[SseEvent] = []
            async for event in stream:
                seen.append(event)
                if event.event == "ready":
                    api.emit("agent.attached")
                if len(seen) == 4:
                    break
            await stream.aclose()  # type: ignore[attr-defined]
            assert [(e.id, e.event) for e in seen] == [
                ("2", "agent.renamed"),
                ("3", "agent.moved"),
                ("3", "ready"),
                ("4", "agent.attached"),
            ]
            data = seen[3].json()
            assert isinstance(data, dict)
            assert (data["seq"], data["type"], data["data"]) == (4, "agent.attached", {})

        run(scenario)


def test_stream_events_wrong_secret_is_an_api_error() -> None:
    """A 401 is not retried as if the broker were down: it is the caller's mistake."""
    with running_api() as api:

        async def scenario() -> None:
            with pytest.raises(ApiError) as caught:
                async for _ in stream_events(api.url, "/v1/events", token="wrong", last_event_id=0):
                    pass
            assert caught.value.status == 401
            assert caught.value.code == "unauthenticated"

        run(scenario)


def test_stream_events_nothing_listening_is_unreachable() -> None:
    """A closed port raises Unreachable (the app retries)."""
    with refused_port() as port:

        async def scenario() -> None:
            with pytest.raises(Unreachable):
                async for _ in stream_events(
                    f"http://127.0.0.1:{port}", "/v1/events", token="x", last_event_id=None
                ):
                    pass

        run(scenario)


def test_http_source_maps_refusals_and_missing_broker() -> None:
    """404/409 become ApiError with the broker's code; no answer becomes Unreachable."""
    with running_api() as api:
        source = HttpSource.fixed(api.url, api.secret)
        with pytest.raises(ApiError) as caught:
            source.act("agt_missing", "archive")
        assert (caught.value.status, caught.value.code) == (404, "not_found")
        bob = api.add_agent("ws-1", "bob", archived=True)
        with pytest.raises(ApiError) as caught:
            source.act(bob, "archive")
        assert caught.value.code == "conflict"
        url = api.url
    with pytest.raises(Unreachable):
        HttpSource.fixed(url, "x").snapshot()


def test_stream_ends_with_closing_when_the_server_stops() -> None:
    """A graceful stop sends `event: closing` before the stream ends."""
    with running_api() as api:

        async def scenario() -> None:
            stream = stream_events(api.url, "/v1/events", token=api.secret, last_event_id=None)
            assert (await anext(stream)).event == "ready"
            await asyncio.to_thread(api.stop)
            assert [event.event async for event in stream] == ["closing"]

        run(scenario)
