"""Property test: requests generated from `GET /v1/openapi.json` (schemathesis) against a real
broker never get a 5xx, and every response conforms to the document (status, content type,
body schema); requests the document allows are not refused as invalid (no 400), and requests
built to violate it are refused with a 4xx.

The schemathesis test is a plain sync test (schemathesis drives `requests` itself). The
event streams are left out: they never end, so there is no response to check. A second test
walks every bound and pattern of the document deterministically, at and just past its edge.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

import httpx2
import hypothesis
import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import schemathesis
import trio
from hypothesis import strategies as st
from schemathesis.core.result import Ok

from pager.client import request_json
from pager.domain.views import encode_cursor
from pager.sse import SseParser
from tests.e2e.conftest import Broker, mcp_session, structured

#: Examples per operation, generation mode and credential: keeps the whole test within ~40 s.
EXAMPLES = 8
#: Headers that frame the HTTP message itself: a malformed one (an empty Content-Length) is
#: refused by the HTTP layer with its own plain 400 before any route or document applies.
FRAMING = frozenset({"content-length", "transfer-encoding"})


def _register_formats(broker: Broker) -> None:
    """Strategies for what the document marks with a format of its own because no schema can
    say it: a directory that exists, and a cursor a view could have handed out (any agent id,
    any SQLite rowid, any slug and alias: one past the end is an empty page). Every check runs,
    `positive_data_acceptance` included."""
    directories = [str(broker.workspace), str(broker.workspace) + "/", "/", "/tmp"]
    schemathesis.openapi.format("existing-directory", st.sampled_from(directories))
    # Paths and globs inside the workspace (relative to its top, or absolute under it).
    paths = ["src/x.py", "README.md", "docs/a b.md", str(broker.workspace / "src" / "y.py")]
    schemathesis.openapi.format("workspace-path", st.sampled_from([*paths, "src/[x].py"]))
    schemathesis.openapi.format("workspace-pattern", st.sampled_from([*paths, "src/*.py", "**"]))
    schemathesis.openapi.format(
        "agents-cursor", st.builds(encode_cursor, st.just("agents"), st.text(max_size=40))
    )
    schemathesis.openapi.format(
        "messages-cursor",
        st.builds(encode_cursor, st.just("messages"), st.integers(-(2**63), 2**63 - 1)),
    )
    # A roster cursor holds where its page ends: a workspace slug, a slash, an alias key.
    schemathesis.openapi.format(
        "roster-cursor",
        st.builds(
            lambda slug, alias: encode_cursor("roster", f"{slug}/{alias}"),
            st.text(max_size=40),
            st.text(max_size=40),
        ),
    )


def _call(broker: Broker, method: str, path: str, body: Any = None, token: str = "") -> Any:
    status, answer = request_json(
        broker.url, method, path, token=token or broker.secret, body=body, timeout=30
    )
    assert status < 300, (path, answer)
    return answer


async def _exchange(url: str, alice: str, bob: str) -> None:
    """Mail in every state a view shows: queued, claimed, acknowledged."""
    with trio.fail_after(60):
        async with mcp_session(url, alice) as a, mcp_session(url, bob) as b:
            for n in range(4):
                structured(await a.call_tool("send", {"to": "bob", "body": f"m{n}", "thread": "t"}))
            [claim] = structured(await b.call_tool("fetch", {"limit": 1}))["claims"]
            structured(await b.call_tool("ack", {"tokens": [claim["token"]]}))
            structured(await b.call_tool("fetch", {"limit": 1}))
            structured(await b.call_tool("send", {"to": "alice", "body": "reply"}))


#: schemathesis's own list of statuses that refuse an invalid request, and 413: a body over the
#: broker's byte cap (a message body the document bounds in characters) is `oversized_content`.
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CHECKS = {"negative_data_rejection": {"expected-statuses": [*REFUSALS, "5xx"]}}

#: Operations that end what the others use (a session, an agent, the mailbox token), so they
#: run after every other one: detach ends the session token's session, archive and purge end
#: the sessions of the agents they hit (the test's own among them), claim-identity takes the
#: identity of a session over, and a revoked mailbox token pages no more.
ENDING = ("detach", "archiveAgent", "purgeAgent", "meClaimIdentity", "revokeToken")


def _operations(
    document: dict[str, Any], bearers: dict[str, str], *, only: str | None = None
) -> list[schemathesis.APIOperation[Any, Any, Any, Any]]:
    """The document's operations with schemathesis's auth set to `bearers` (scheme name to
    value), so that a case generated without credentials (a negative one) really goes
    without them; `only`: just the operations that accept that scheme on its own."""
    auth = {
        name: {"api_key" if name == "personWorkspace" else "bearer": value}
        for name, value in bearers.items()
    }
    config = schemathesis.Config.from_dict({"auth": {"openapi": auth}, "checks": CHECKS})
    loaded = schemathesis.openapi.from_dict(document, config=config)
    # The event streams never end, so there is no response to check (test below instead).
    schema = loaded.exclude(path_regex=r"/events$")
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # every operation of the document loads
        operation = result.ok()
        security = document["paths"][operation.path][operation.method.lower()]["security"]
        if only is None or {only: []} in security:
            operations.append(operation)
    return operations


def test_v1_conforms_to_its_openapi_document(broker: Broker) -> None:
    """No generated request gets a 5xx; every answer matches the document, with each credential
    a route takes: the local secret (on `/v1/me/…` with the `workspace` the document requires
    with it), a session token, a mailbox token."""
    workspace = str(broker.workspace)
    agents = {}
    for name in ("alice", "bob", "carol"):
        body = {"workspace": workspace, "implementation": "shell", "session_name": name}
        agents[name] = _call(broker, "POST", "/v1/register", body)
    known = [agent["agent_id"] for agent in agents.values()]
    trio.run(_exchange, broker.url, agents["alice"]["token"], agents["bob"]["token"])
    document = _call(broker, "GET", "/v1/openapi.json")
    _register_formats(broker)
    mailbox = _call(broker, "POST", "/v1/tokens", {"to": "carol", "workspace": workspace})
    as_person = _operations(
        document,
        {
            "localSecret": broker.secret,
            "personWorkspace": workspace,
            "mailboxToken": mailbox["token"],
        },
    )
    assert len(as_person) >= 30
    as_session = _operations(
        document, {"sessionToken": agents["carol"]["token"]}, only="sessionToken"
    )
    assert len(as_session) >= 12
    # With the session token, positive cases only: the parsing is the same whatever the
    # credential (the negative cases ran with the secret); who the request acts as is not.
    runs = sorted(
        [*((op, True) for op in as_person), *((op, False) for op in as_session)],
        key=lambda run: run[0].definition.raw["operationId"] in ENDING,
    )
    failures: list[str] = []  # every operation's, not only the first one's
    for operation, negative_too in runs:
        described = document["paths"][operation.path][operation.method.lower()]
        modes = [schemathesis.GenerationMode.POSITIVE]
        takes_input = "parameters" in described or "requestBody" in described
        if negative_too and takes_input:  # something to violate
            modes.append(schemathesis.GenerationMode.NEGATIVE)
        for mode in modes:
            try:
                _fuzz(operation, mode, broker.url, known)
            except Exception as failure:  # a failed check, or a request that timed out
                failures.append(f"{operation.label} ({mode.value}): {failure}")
    assert not failures, "\n\n".join(failures)


def _fuzz(
    operation: schemathesis.APIOperation[Any, Any, Any, Any],
    mode: schemathesis.GenerationMode,
    url: str,
    known: list[str],
) -> None:
    """Call the operation with generated cases; a path's agent id is often a real one."""

    @hypothesis.given(
        case=operation.as_strategy(generation_mode=mode),
        agent=st.sampled_from([*known, None]),
    )
    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
    )
    def check(case: schemathesis.Case[Any], agent: str | None) -> None:
        if agent is not None and "agent_id" in (case.path_parameters or {}):
            case.path_parameters = {**case.path_parameters, "agent_id": agent}
        body = case.body
        wait = body.get("wait_s") if isinstance(body, dict) else None
        if isinstance(body, dict) and _is_number(wait) and cast(float, wait) > 0:
            body["wait_s"] = 0  # a long poll parks up to a minute; 0 is as valid, and answers
        for name in [n for n in case.headers or () if n.lower() in FRAMING]:
            del case.headers[name]  # the message's framing is HTTP's: h11 refuses it first
        case.call_and_validate(base_url=url, timeout=30)

    check()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _edges(schema: dict[str, Any], start: str = "") -> list[tuple[object, bool]]:
    """Values at the edges of `schema`'s bounds, each with whether the schema admits it;
    strings begin with `start` (what the field's pattern needs first) and go on with `a`."""

    def text(length: int) -> str:
        return start + "a" * (length - len(start))

    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    found: list[tuple[object, bool]] = []
    if "integer" in kinds or "number" in kinds:
        step = 1 if "integer" in kinds else 0.5
        if "minimum" in schema:
            found += [(schema["minimum"], True), (schema["minimum"] - step, False)]
        if "maximum" in schema:
            found += [(schema["maximum"], True), (schema["maximum"] + step, False)]
    if "string" in kinds:
        if "minLength" in schema:
            shortest = schema["minLength"]
            found.append((text(shortest), True))
            if shortest:
                found.append((text(shortest - 1), False))
        if "maxLength" in schema:
            found += [(text(schema["maxLength"]), True), (text(schema["maxLength"] + 1), False)]
    return found


#: Values that fields with a pattern must refuse (the issue's `cursor=0`, `workspace: ""`).
OUTSIDE_PATTERNS: dict[str, list[str]] = {
    "workspace": ["", "relative/dir"],
    "implementation": ["", "--", "é", "a b"],
    "session_name": ["", "-x", "agt_x", "AGT_x", "a b"],
    "cursor": ["0", "AAAA", "eyJ2IjoiYWdlbnRz"],
    "harness": ["", "4242", "x:1", "1:", "1: a"],
}
#: How a field's strings must begin for its pattern (the rest of its edges is `a`s).
STARTS = {"harness": "1:"}


def _cases(field: str, schema: dict[str, Any]) -> list[tuple[object, bool]]:
    """`_edges`, and the values outside the field's pattern, if it has one."""
    found = _edges(schema, STARTS.get(field, ""))
    if "pattern" in schema:
        outside = OUTSIDE_PATTERNS[field]
        assert not any(re.search(schema["pattern"], value) for value in outside), field
        found += [(value, False) for value in outside]
    return found


async def test_v1_accepts_the_document_bounds_and_refuses_past_them(broker: Broker) -> None:
    """Each bound and pattern of the document: its edge is accepted, just past it is a 400."""
    known = (await broker.register("bounds"))["agent_id"]
    headers = {"Authorization": f"Bearer {broker.secret}"}
    cases: list[tuple[str, str, dict[str, Any], object, bool]] = []
    with trio.fail_after(120):
        async with httpx2.AsyncClient(base_url=broker.url, headers=headers, timeout=30) as http:
            document = (await http.get("/v1/openapi.json")).json()
            schemas = document["components"]["schemas"]
            bodies = {
                "/v1/register": ("RegisterRequest", {"workspace": str(broker.workspace)}),
                "/v1/hook/claim": ("HookClaimRequest", {"conversation_key": "bounds"}),
            }
            for path, (name, base) in bodies.items():
                for field, schema in schemas[name]["properties"].items():
                    for value, admitted in _cases(field, schema):
                        body = {"implementation": "shell", **base, field: value}
                        response = await http.post(path, json=body)
                        cases.append((path, field, response.json(), value, admitted))
            for path in ("/v1/agents", "/v1/agents/{agent_id}/messages"):
                for parameter in document["paths"][path]["get"]["parameters"]:
                    if parameter["in"] != "query":
                        continue
                    field = parameter["name"]
                    for value, admitted in _cases(field, parameter["schema"]):
                        url = path.replace("{agent_id}", known)
                        response = await http.get(url, params={field: str(value)})
                        cases.append((path, field, response.json(), value, admitted))
    bounded = {field for _, field, _, _, _ in cases}
    assert bounded >= {*OUTSIDE_PATTERNS, "conversation_key", "max_chars", "wait_s", "limit"}
    for path, field, answer, value, admitted in cases:
        refused = "error" in answer and answer["error"]["code"] == "validation_failed"
        shown = value if not isinstance(value, str) or len(value) < 20 else f"{len(value)} chars"
        assert refused is not admitted, (path, field, shown, answer)


async def _stream_events(
    url: str, headers: dict[str, str], last: str, live: trio.Event | None = None
) -> list[dict[str, Any]]:
    """The events of an event stream as a client parses them (`{event, data, id?, retry?}`,
    what the schema of an OpenAPI 3.1 `text/event-stream` response describes), up to the first
    `last` one; `live` is set at the first event."""
    parser = SseParser()
    found: list[dict[str, Any]] = []
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        http.stream("GET", url, headers=headers) as r,
    ):
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        async for line in r.aiter_lines():
            frame = parser.feed_line(line)
            if frame is None:
                continue
            event: dict[str, Any] = {"event": frame.event, "data": frame.data}
            if parser.last_id:
                event["id"] = parser.last_id  # an event without one keeps the stream's last
            if frame.retry is not None:
                event["retry"] = frame.retry
            found.append(event)
            if live is not None:
                live.set()
            if frame.event == last:
                return found
    raise AssertionError(f"the stream ended before `{last}`: {found}")


async def test_event_streams_send_the_events_the_document_describes(broker: Broker) -> None:
    """The two event streams (left out of the property test: they never end) send events that
    match their documented schema: the session's `ready` and `ended`, the operator stream's
    replayed events and its `ready`."""
    with trio.fail_after(60):
        async with httpx2.AsyncClient(base_url=broker.url, timeout=30) as http:
            document = (await http.get("/v1/openapi.json")).json()
        session = await broker.register("streamer")
        own = {"Authorization": f"Bearer {session['token']}"}
        url = f"{broker.url}/v1/sessions/current/events"
        seen: list[dict[str, Any]] = []
        live = trio.Event()

        async def read() -> None:
            seen.extend(await _stream_events(url, own, "ended", live))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await live.wait()
            await broker.register("streamer", force=True)  # replaces the session: `ended`
        operator = {"Authorization": f"Bearer {broker.secret}", "Last-Event-ID": "0"}
        replayed = await _stream_events(f"{broker.url}/v1/events", operator, "ready")
    for path, events in {"/v1/sessions/current/events": seen, "/v1/events": replayed}.items():
        described = document["paths"][path]["get"]["responses"]["200"]["content"]
        validator = jsonschema.Draft202012Validator(described["text/event-stream"]["schema"])
        assert len(events) >= 2, (path, events)
        for event in events:
            validator.validate(event)
            json.loads(event["data"])  # every event's data is JSON text
