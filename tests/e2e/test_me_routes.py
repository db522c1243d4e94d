"""`/v1/me/…` against a real broker: a session (its token) and the person at the terminal (the
local secret and `?workspace=`), SPEC §4.2 and §6."""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trio

from pager.client import request_json
from pager.domain.names import alias_of_login
from pager.domain.views import encode_cursor
from tests.e2e.conftest import FAST_WINDOWS, Broker, mcp_session, start_broker, structured
from tests.launch.conftest import PagerHome

LOGIN_ALIAS = alias_of_login(pwd.getpwuid(os.getuid()).pw_name)


def as_person(
    broker: Broker, method: str, path: str, body: Any = None, workspace: Path | None = None
) -> tuple[int, Any]:
    where = quote(str(workspace or broker.workspace))
    joiner = "&" if "?" in path else "?"
    return request_json(
        broker.url, method, f"/v1/me{path}{joiner}workspace={where}", token=broker.secret,
        body=body,
    )  # fmt: skip


def ok(answer: tuple[int, Any]) -> Any:
    status, body = answer
    assert status == 200, body
    return body


async def test_the_person_and_an_agent_exchange_mail(broker: Broker) -> None:
    """The person sends to bob; bob reads it from the person's address and replies to the
    person's alias; the person sees it waiting (twice: nothing claimed), claims, acks."""
    me = ok(as_person(broker, "GET", ""))
    assert (me["alias"], me["implementation"], me["durable"]) == (LOGIN_ALIAS, "human", True)
    assert (me["acting_as"], me["session"]) == ("person", None)
    bob = await broker.register("bob")
    sent = ok(as_person(broker, "POST", "/send", {"to": "bob", "body": "please look at #12"}))
    assert sent["recipient"]["address"] == bob["address"]
    with trio.fail_after(30):
        async with mcp_session(broker.url, bob["token"]) as b:
            [claim] = structured(await b.call_tool("fetch", {}))["claims"]
            assert claim["message"]["from"] == me["address"]
            structured(await b.call_tool("ack", {"tokens": [claim["token"]]}))
            structured(await b.call_tool("send", {"to": LOGIN_ALIAS, "body": "done: #12"}))
    for _ in range(2):  # the inbox only looks
        inbox = ok(as_person(broker, "GET", "/inbox"))
        assert inbox["waiting"] == 1
        [waiting] = inbox["messages"]
        assert (waiting["from"], waiting["body"], waiting["state"]) == (
            bob["address"], "done: #12", "queued"
        )  # fmt: skip
    [claim] = ok(as_person(broker, "POST", "/claim", {"limit": 5}))["claims"]
    assert claim["message"]["body"] == "done: #12"
    acked = ok(as_person(broker, "POST", "/ack", {"tokens": [claim["token"]]}))
    assert acked == {"applied": [claim["token"]], "not_applied": []}
    assert ok(as_person(broker, "GET", "/inbox"))["waiting"] == 0
    [mine] = ok(as_person(broker, "GET", "/sent"))["messages"]
    assert (mine["to"], mine["state"]) == (bob["address"], "acknowledged")
    status = ok(as_person(broker, "GET", f"/sent/{sent['message_id']}"))
    assert status["state"] == "acknowledged"
    history = ok(as_person(broker, "GET", "/history?with=bob&limit=10"))["messages"]
    assert [m["direction"] for m in history] == ["received", "sent"]
    roster = {a["alias"]: a for a in ok(as_person(broker, "GET", "/roster"))["agents"]}
    assert roster[LOGIN_ALIAS]["implementation"] == "human"
    assert roster[LOGIN_ALIAS]["attached"] is False  # the person never holds a session
    assert roster[LOGIN_ALIAS]["you"] is True


async def test_the_roster_comes_in_pages_that_follow_next_cursor(broker: Broker) -> None:
    """`GET /v1/me/roster?limit=&cursor=`: the tool's pages over HTTP, by alias, to the end."""
    names = [f"peer-{n}" for n in range(4)]
    for name in names:
        await broker.register(name)
    person = ok(as_person(broker, "GET", ""))
    page = ok(as_person(broker, "GET", "/roster?limit=2"))
    pages = [page]
    while page["next_cursor"] is not None:
        page = ok(as_person(broker, "GET", f"/roster?limit=2&cursor={page['next_cursor']}"))
        pages.append(page)
    assert [len(p["agents"]) for p in pages] == [2, 2, 1]
    aliases = [agent["alias"] for p in pages for agent in p["agents"]]
    assert aliases == sorted([*names, person["alias"]], key=str.lower)
    whole = ok(as_person(broker, "GET", "/roster?scope=all&limit=500"))
    assert [agent["alias"] for agent in whole["agents"]] == aliases
    assert whole["next_cursor"] is None


async def test_the_person_has_one_identity_per_workspace(broker: Broker, tmp_path: Path) -> None:
    here = ok(as_person(broker, "GET", ""))
    again = ok(as_person(broker, "GET", ""))
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    there = ok(as_person(broker, "GET", "", workspace=other_dir))
    assert here["agent_id"] == again["agent_id"]
    assert there["agent_id"] != here["agent_id"]
    assert there["alias"] == here["alias"] == LOGIN_ALIAS


async def test_a_session_token_acts_as_its_session(broker: Broker) -> None:
    bob = await broker.register("bob")
    status, me = request_json(broker.url, "GET", "/v1/me", token=bob["token"])
    assert status == 200
    assert (me["agent_id"], me["acting_as"]) == (bob["agent_id"], "session")
    assert me["session"]["id"] == bob["session_id"]


def test_cli_name_chooses_the_persons_alias(tmp_path: Path) -> None:
    home = PagerHome(tmp_path / "home")
    home.root.mkdir(mode=0o700)
    (home.root / "config.toml").write_text('[cli]\nname = "ada"\n')
    broker = start_broker(home, tmp_path / "repo", **FAST_WINDOWS)
    try:
        assert ok(as_person(broker, "GET", ""))["alias"] == "ada"
    finally:
        home.kill_all()


async def test_a_persons_name_held_by_an_agent_is_refused_naming_the_fix(broker: Broker) -> None:
    squatter = await broker.register(LOGIN_ALIAS)
    status, answer = as_person(broker, "GET", "")
    assert status == 409
    assert answer["error"]["code"] == "alias_conflict"
    assert squatter["agent_id"] in answer["error"]["message"]
    assert "[cli] name" in answer["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/send", {"to": "bob", "body": ""}, 400, "validation_failed"),
        ("/send", {"to": "bob", "body": " \n"}, 400, "validation_failed"),
        ("/send", {"to": "nobody", "body": "x"}, 404, "unknown_recipient"),
        ("/send", {"to": "bob", "body": "x" * (32 * 1024 + 1)}, 413, "oversized_content"),
        ("/send", {"to": "bob"}, 400, "validation_failed"),
        ("/send", ["not", "an", "object"], 400, "validation_failed"),
        ("/claim", {"limit": 0}, 400, "validation_failed"),
        ("/ack", {"tokens": []}, 400, "validation_failed"),
        ("/inbox?limit=zero", None, 400, "validation_failed"),
        ("/history?colour=red", None, 400, "validation_failed"),
        ("/roster?limit=501", None, 400, "validation_failed"),
        ("/roster?cursor=0", None, 400, "validation_failed"),
        (f"/roster?cursor={encode_cursor('roster', 'no-slash')}", None, 400, "validation_failed"),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(
    broker: Broker, path: str, body: Any, status: int, code: str
) -> None:
    await broker.register("bob")
    method = "GET" if body is None else "POST"
    answer = as_person(broker, method, path, body)
    assert (answer[0], answer[1]["error"]["code"]) == (status, code), answer
    assert await broker.messages() == []


def test_credentials_and_workspace_are_required(broker: Broker) -> None:
    status, answer = request_json(broker.url, "GET", "/v1/me/inbox")
    assert (status, answer["error"]["code"]) == (401, "unauthenticated")
    status, answer = request_json(broker.url, "GET", "/v1/me/inbox", token="not-the-secret")
    assert (status, answer["error"]["code"]) == (401, "unauthenticated")
    status, answer = request_json(broker.url, "GET", "/v1/me/inbox", token=broker.secret)
    assert (status, answer["error"]["code"]) == (400, "validation_failed")
    assert "?workspace=" in answer["error"]["message"]
    status, answer = request_json(
        broker.url, "GET", "/v1/me?workspace=relative/dir", token=broker.secret
    )
    assert (status, answer["error"]["code"]) == (400, "validation_failed")
    assert broker.export_sync() == []  # no identity (and so no message)


@pytest.mark.parametrize(
    ("method", "path", "body", "named"),
    [
        ("POST", "/send?colour=red", {"to": "bob", "body": "hi"}, "colour"),
        ("POST", "/claim?wait_s=5", {}, "wait_s"),
        ("POST", "/ack?tokens=x", {"tokens": ["clm_x"]}, "tokens"),
        ("GET", "?colour=red", None, "colour"),
    ],
)
async def test_a_query_parameter_the_route_does_not_take_is_refused_by_name(
    broker: Broker, method: str, path: str, body: Any, named: str
) -> None:
    """A POST takes its arguments in its JSON body: a stray `?name=` is refused, naming it
    and what the route takes, as a GET's is, and nothing is sent or claimed."""
    bob = await broker.register("bob")
    ok(as_person(broker, "POST", "/send", {"to": "bob", "body": "waiting"}))
    status, answer = as_person(broker, method, path, body)
    assert (status, answer["error"]["code"]) == (400, "validation_failed"), answer
    message = answer["error"]["message"]
    assert f"unknown query parameter {named!r}" in message
    assert "this route takes: workspace, harness" in message
    [waiting] = await broker.messages()
    assert (waiting["to"], waiting["state"]) == (bob["agent_id"], "queued")


def test_a_query_parameter_given_twice_is_refused(broker: Broker) -> None:
    where = quote(str(broker.workspace))
    status, answer = request_json(
        broker.url, "POST", f"/v1/me/send?workspace={where}&workspace={where}",
        token=broker.secret, body={"to": "nobody", "body": "hi"},
    )  # fmt: skip
    assert (status, answer["error"]["code"]) == (400, "validation_failed"), answer
    assert "'workspace' is given more than once" in answer["error"]["message"]
    assert broker.export_sync() == []
