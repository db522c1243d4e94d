"""Hostile JSON at every request edge of a real broker: nesting, non-finite numbers, too many
keys, too long text. Each is refused with `400 validation_failed` naming its bound, stores
nothing and leaves no traceback in the log; and what Pager writes out parses strictly."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import httpx2
import trio

from pager.launch.paths import StatePaths
from tests.e2e.conftest import Broker

DEEP = 10_000


def nested(levels: int) -> str:
    """`levels` arrays inside one another, as JSON text."""
    return "[" * levels + "]" * levels


def strict(text: str) -> Any:
    """JSON as a strict reader takes it: NaN, Infinity and -Infinity are errors."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is no JSON")

    return json.loads(text, parse_constant=refuse)


async def post(
    broker: Broker, path: str, token: str, body: str | bytes, method: str = "POST"
) -> tuple[int, Any]:
    """POST (or `method`) the body exactly as given: no client-side JSON encoding fixes it."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=30) as http:
        with trio.fail_after(30):
            response = await http.request(method, broker.url + path, content=body, headers=headers)
    return response.status_code, response.json()


async def get(broker: Broker, path: str, token: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        with trio.fail_after(30):
            return await http.get(broker.url + path, headers={"Authorization": f"Bearer {token}"})


async def mailbox_token(broker: Broker, to: str) -> str:
    status, made = await broker.post(
        "/v1/tokens", {"to": to, "workspace": str(broker.workspace)}, token=broker.secret
    )
    assert status == 201, made
    token: str = made["token"]
    return token


def broker_log(broker: Broker) -> str:
    return (broker.home.root / "logs" / "broker.log").read_text()


def refused(status: int, answer: Any, *words: str) -> None:
    """A `400 validation_failed` whose message names `words` (the bound and its limit)."""
    assert (status, answer["error"]["code"]) == (400, "validation_failed"), answer
    for word in words:
        assert word in answer["error"]["message"], (word, answer)


async def test_a_nested_page_is_refused_and_the_mailbox_stays_clean(broker: Broker) -> None:
    """A mailbox-token holder pages a field nested 400 levels deep (under 1 KB): refused at
    the edge, naming the limit; nothing is stored, and the recipient's inbox, claim and
    history keep answering."""
    ci = await broker.register("ci")
    token = await mailbox_token(broker, "ci")
    page = '{"message": "hi", "x": ' + nested(400) + "}"
    assert len(page) < 1024
    refused(*await post(broker, "/v1/notify", token, page), "401 levels deep", "limit is 32")
    # The same page through the session route `pager run` uses.
    send = '{"to": "ci", "page": ' + page + "}"
    refused(*await post(broker, "/v1/me/notify", ci["token"], send), "limit is 32")
    assert await broker.messages() == []
    inbox = await get(broker, "/v1/me/inbox", ci["token"])
    assert (inbox.status_code, inbox.json()["messages"]) == (200, [])
    status, claimed = await post(broker, "/v1/me/claim", ci["token"], "{}")
    assert (status, claimed["claims"]) == (200, [])
    # A page nested within the request's bound but past a field's own (16 levels) gets the
    # page's message.
    shallower = '{"message": "hi", "x": ' + nested(20) + "}"
    refused(*await post(broker, "/v1/notify", token, shallower), "field `x`", "limit is 16")
    assert await broker.messages() == []


async def test_deep_json_on_every_v1_edge_is_400_without_a_traceback(broker: Broker) -> None:
    """10,000 nested levels on register, me/send, me/notify, tokens, notify and the wake and
    operator actions: 400 naming the limit (not 500), no traceback in the log, no change."""
    alice = await broker.register("alice")
    token = await mailbox_token(broker, "alice")
    before = await broker.state()
    log_before = broker_log(broker)
    for method, path, credential in [
        ("POST", "/v1/register", broker.secret),
        ("POST", "/v1/hook/claim", broker.secret),
        ("POST", "/v1/me/send", alice["token"]),
        ("POST", "/v1/me/notify", alice["token"]),
        ("POST", "/v1/me/claim", alice["token"]),
        ("POST", "/v1/tokens", broker.secret),
        ("POST", "/v1/notify", token),
        ("PUT", f"/v1/agents/{alice['agent_id']}/wake", broker.secret),
    ]:
        for body, depth in [
            (nested(DEEP), DEEP),
            ('{"to": "alice", "body": ' + nested(DEEP) + "}", DEEP + 1),
        ]:
            status, answer = await post(broker, path, credential, body, method)
            refused(status, answer, f"nested {depth} levels deep", "the limit is 32")
    # An operator action takes no arguments: refused with its own message, never a 500.
    status, answer = await post(broker, f"/v1/agents/{alice['agent_id']}/archive", broker.secret,
                                nested(DEEP))  # fmt: skip
    refused(status, answer, "takes no arguments")
    added = broker_log(broker)[len(log_before) :]
    assert "Traceback" not in added, added[-2000:]
    assert "RecursionError" not in added, added[-2000:]
    assert await broker.state() == before


async def test_non_finite_numbers_in_a_page_are_refused(broker: Broker) -> None:
    """NaN, Infinity, -Infinity (Python's parser takes them) and 1e999 (a double's infinity):
    refused on both page routes, naming the number; nothing stored."""
    ci = await broker.register("ci")
    token = await mailbox_token(broker, "ci")
    for number, shown in [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("1e999", "Infinity"),
        ('[1, {"deep": -1e400}]', "-Infinity"),
    ]:
        page = '{"message": "done", "ratio": ' + number + "}"
        refused(*await post(broker, "/v1/notify", token, page), shown, "$.ratio")
        send = '{"to": "ci", "page": ' + page + "}"
        refused(*await post(broker, "/v1/me/notify", ci["token"], send), shown)
    assert await broker.messages() == []


async def test_too_many_keys_and_too_long_text_are_refused(broker: Broker) -> None:
    """Past keys per object, items per array, key length or text length: 400 naming the bound
    and where it was crossed; nothing stored."""
    alice = await broker.register("alice")
    many_keys = {"to": "alice", "body": "x", **{f"k{i}": 1 for i in range(300)}}
    refused(*await post(broker, "/v1/me/send", alice["token"], json.dumps(many_keys)),
            "302 keys", "the limit is 256")  # fmt: skip
    long_key = {"to": "alice", "body": "x", "k" * 300: 1}
    refused(*await post(broker, "/v1/me/send", alice["token"], json.dumps(long_key)),
            "300 characters long", "the limit is 256")  # fmt: skip
    long_text = {"to": "alice", "body": "x" * 300_000}
    refused(*await post(broker, "/v1/me/send", alice["token"], json.dumps(long_text)),
            "$.body", "300000 characters long", "the limit is 262144")  # fmt: skip
    many_items = {"tokens": ["t"] * 2000}
    refused(*await post(broker, "/v1/me/ack", alice["token"], json.dumps(many_items)),
            "$.tokens", "2000 items", "the limit is 1024")  # fmt: skip
    assert await broker.messages() == []


async def test_deep_json_on_mcp_is_a_json_rpc_400(broker: Broker) -> None:
    """A session's JSON-RPC call nested 10,000 levels (or carrying NaN) gets a JSON-RPC parse
    error with HTTP 400 naming the bound, before the SDK parses it; nothing runs or is
    logged as a failure."""
    alice = await broker.register("alice")
    before = await broker.counts()
    log_before = broker_log(broker)
    headers = {
        "Authorization": f"Bearer {alice['token']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    for arguments, words in [
        (nested(DEEP), (f"nested {DEEP + 2} levels deep", "the limit is 32")),
        ('{"to": "alice", "body": "x", "n": NaN}', ("NaN", "$.params.arguments.n")),
    ]:
        body = json.dumps(call)[:-1] + ', "params": {"name": "send", "arguments": '
        async with httpx2.AsyncClient(timeout=30) as http:
            with trio.fail_after(30):
                response = await http.post(
                    broker.url + "/mcp", content=body + arguments + "}}", headers=headers
                )
        assert response.status_code == 400, response.text
        answer = response.json()
        assert (answer["jsonrpc"], answer["id"], answer["error"]["code"]) == ("2.0", None, -32700)
        assert answer["error"]["data"] == {"code": "validation_failed"}
        for word in words:
            assert word in answer["error"]["message"], answer
    added = broker_log(broker)[len(log_before) :]
    assert "Traceback" not in added, added[-2000:]
    assert await broker.counts() == before


async def test_a_stored_nan_is_written_out_as_strict_json(broker: Broker) -> None:
    """A page's NaN stored before the edge refused it (written into the store here, as an
    older broker did) reads back as the text "NaN": the inbox, a claim and the export all
    parse with a strict reader."""
    ci = await broker.register("ci2")
    token = await mailbox_token(broker, "ci2")
    status, sent = await post(broker, "/v1/notify", token, '{"message": "hi", "ratio": 0.5}')
    assert status == 202, sent
    database = StatePaths(broker.home.root).database
    conn = sqlite3.connect(database, isolation_level=None, timeout=10)
    try:
        changed = conn.execute(
            "UPDATE messages SET fields = ? WHERE id = ?",
            ('{"ratio": NaN, "top": [Infinity, -Infinity]}', sent["message_id"]),
        ).rowcount
    finally:
        conn.close()
    assert changed == 1
    expected = {"ratio": "NaN", "top": ["Infinity", "-Infinity"]}
    inbox = await get(broker, "/v1/me/inbox", ci["token"])
    [message] = strict(inbox.text)["messages"]
    assert message["fields"] == expected
    async with httpx2.AsyncClient(timeout=30) as http:
        claimed = await http.post(broker.url + "/v1/me/claim", content=b"{}",
                                  headers={"Authorization": f"Bearer {ci['token']}"})  # fmt: skip
    [claim] = strict(claimed.text)["claims"]
    assert claim["message"]["fields"] == expected
    exported = await get(broker, "/v1/export", broker.secret)
    records = [strict(line) for line in exported.text.splitlines()]
    [record] = [r for r in records if r["kind"] == "message"]
    assert record["fields"] == expected
