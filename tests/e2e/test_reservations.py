"""Edit reservations end to end (docs/reservations.md): two agents over MCP, the CLI as real
`pager` processes (agents by their session tokens, the person, the operator's break), the
edit hooks' check, hostile input at every edge, a malicious agent with its own token, and two
brokers sharing a PostgreSQL store. The CLI test runs the commands docs/reservations.md and
docs/cli.md show."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import (
    FAST_WINDOWS,
    Broker,
    mcp_session,
    postgres_env,
    structured,
    tool_error,
)
from tests.e2e.test_everyday_cli import pager
from tests.e2e.test_two_brokers import HEARTBEAT, _host_broker


async def _http(
    broker: Broker, method: str, path: str, token: str, body: object = None
) -> tuple[int, Any]:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.request(
            method,
            broker.url + path,
            headers={"Authorization": f"Bearer {token}"},
            content=None if body is None else json.dumps(body),
        )
    return response.status_code, response.json()


async def _check(broker: Broker, token: str, *paths: str) -> list[dict[str, Any]]:
    status, answer = await _http(
        broker, "POST", "/v1/me/reservations/check", token, {"paths": list(paths)}
    )
    assert status == 200, answer
    conflicts: list[dict[str, Any]] = answer["conflicts"]
    return conflicts


async def test_reservations_two_agents_over_mcp_and_the_check(broker: Broker) -> None:
    """A reserves src/*.py; B's reserve of src/x.py is refused naming A, and takes nothing;
    B's check of src/x.py conflicts (relative or absolute), docs/y.md does not; A releases,
    and B gets it."""
    alice, bob = await broker.register("alice"), await broker.register("bob")
    with trio.fail_after(60):
        async with (
            mcp_session(broker.url, alice["token"]) as a,
            mcp_session(broker.url, bob["token"]) as b,
        ):
            got = structured(
                await a.call_tool("reserve", {"paths": ["src/*.py"], "reason": "refactor"})
            )
            assert [r["pattern"] for r in got["reserved"]] == ["src/*.py"]
            refused = tool_error(await b.call_tool("reserve", {"paths": ["docs/y.md", "src/x.py"]}))
            assert refused["code"] == "conflict"
            assert alice["address"] in refused["message"]
            assert "ask its holder with send" in refused["message"]  # the MCP edge's words
            (held,) = refused["conflicts"]
            assert (held["holder"], held["pattern"], held["reason"]) == (
                alice["address"],
                "src/*.py",
                "refactor",
            )
            listed = structured(await b.call_tool("reservations", {}))
            assert [r["pattern"] for r in listed["reservations"]] == ["src/*.py"]  # nothing taken

            absolute = str(broker.workspace / "src" / "x.py")
            conflicts = await _check(broker, bob["token"], "src/x.py", "docs/y.md", absolute)
            assert [(c["path"], c["holder"]) for c in conflicts] == [
                ("src/x.py", alice["address"]),
                ("src/x.py", alice["address"]),
            ]
            assert await _check(broker, alice["token"], "src/x.py") == []  # one's own

            released = structured(await a.call_tool("release", {}))
            assert [r["pattern"] for r in released["released"]] == ["src/*.py"]
            assert await _check(broker, bob["token"], "src/x.py") == []
            got = structured(await b.call_tool("reserve", {"paths": ["src/x.py"], "shared": True}))
            assert got["reserved"][0]["exclusive"] is False
            # A shared hold lets an edit through: the check reports exclusive holds only.
            assert await _check(broker, alice["token"], "src/x.py") == []
    kinds = [e["type"] for e in await broker.events("reservation.taken", "reservation.released")]
    assert kinds == ["reservation.taken", "reservation.released", "reservation.taken"]


async def test_reservations_cli_agents_person_and_operator(broker: Broker) -> None:
    """Through real `pager` processes: an agent reserves; another is refused with who, since,
    until and how to ask, exit 1; the person reserves too; the operator breaks by id."""
    alice, bob = await broker.register("alice"), await broker.register("bob")
    here = broker.workspace
    as_alice, as_bob = {"PAGER_TOKEN": alice["token"]}, {"PAGER_TOKEN": bob["token"]}
    done = pager(broker, here, "reserve", "src/*.py", "--reason", "refactor", "--json", **as_alice)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)["reserved"][0]
    (here / "src").mkdir()
    refused = pager(broker, here / "src", "reserve", "x.py", **as_bob)  # relative to the cwd
    assert refused.returncode == 1
    assert alice["address"] in refused.stderr
    assert "nothing was reserved" in refused.stderr
    assert f"pager send {alice['address']}" in refused.stderr
    assert "since" in refused.stderr
    assert "until" in refused.stderr
    as_json = pager(broker, here, "reserve", "src/x.py", "--json", **as_bob)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "conflict"

    person = pager(broker, here, "reserve", "docs/**", "--ttl", "2h", "--shared")
    assert person.returncode == 0, person.stderr
    listing = pager(broker, here, "reservations", "--json")
    listed = {r["pattern"]: r for r in json.loads(listing.stdout)["reservations"]}
    assert set(listed) == {"src/*.py", "docs/**"}
    assert listed["docs/**"]["you"] is True
    assert listed["src/*.py"]["holder"] == alice["address"]
    shown = pager(broker, here, "reservations")
    assert "src/*.py" in shown.stdout
    assert alice["address"] in shown.stdout

    broken = pager(broker, here, "reservations", "break", made["id"])
    assert broken.returncode == 0, broken.stderr
    assert pager(broker, here, "reserve", "src/x.py", **as_bob).returncode == 0
    assert pager(broker, here, "release", "src/x.py", **as_bob).returncode == 0
    assert pager(broker, here, "release", "nothing/held", **as_bob).returncode == 1
    assert (await broker.events("reservation.broken"))[0]["data"]["id"] == made["id"]
    for command in ("reserve", "release", "reservations"):
        helped = pager(broker, here, command, "--help")
        assert helped.returncode == 0
        assert "docs/reservations.md" in helped.stdout


#: Paths a check answers without a refusal: one outside the workspace (nothing here holds
#: it), and glob characters (literal in a path).
CHECK_ANSWERS = ("outside your workspace", "character classes")
HOSTILE: list[tuple[object, str]] = [
    ({"paths": ["x" * 5000]}, "1024"),
    ({"paths": ["../../etc/passwd"]}, ".."),
    ({"paths": ["/etc/passwd"]}, "outside your workspace"),
    ({"paths": ["src/a\x00b"]}, "control character"),
    ({"paths": [f"f{n}" for n in range(10_000)]}, "10000 items"),
    ({"paths": [f"f{n}" for n in range(101)]}, "at most 100"),
    ({"paths": [1]}, "paths"),
    ({"paths": [["src"]]}, "paths"),
    ({"paths": "src/x.py"}, "paths"),
    ({"paths": []}, "at least 1"),
    ({"paths": ["src/[ab].py"]}, "character classes"),
    ({"paths": ["src"], "ttl_s": 10}, "ttl_s"),
    ({"paths": ["src"], "agent_id": "agt_0000000000000000"}, "agent_id"),
    ({"paths": ["src"], "nested": json.loads("[" * 100 + "]" * 100)}, "nest"),
    ([1, 2], "object"),
]


@pytest.mark.parametrize(("body", "words"), HOSTILE)
async def test_reservations_hostile_input_changes_nothing(
    broker: Broker, body: object, words: str
) -> None:
    """Each bad request is refused with 400 naming what is wrong, and takes nothing."""
    mallory = await broker.register("mallory")
    for path in ("/v1/me/reservations", "/v1/me/reservations/check"):
        status, answer = await _http(broker, "POST", path, mallory["token"], body)
        if path.endswith("/check") and words in CHECK_ANSWERS:
            assert (status, answer["conflicts"]) == (200, []), answer
            continue
        assert status == 400, (path, answer)
        assert answer["error"]["code"] == "validation_failed"
        if path.endswith("/reservations"):
            assert words in answer["error"]["message"], answer
    status, answer = await _http(broker, "GET", "/v1/me/reservations?scope=all", mallory["token"])
    assert answer["reservations"] == []


async def test_reservations_a_malicious_agent_cannot_release_or_break_anothers(
    broker: Broker,
) -> None:
    """Mallory, holding her own session token: releasing alice's pattern releases nothing of
    alice's; breaking it by id is refused (the local secret only); the MCP tools take no
    identity argument; alice's reservation still blocks."""
    alice, mallory = await broker.register("alice"), await broker.register("mallory")
    status, made = await _http(
        broker, "POST", "/v1/me/reservations", alice["token"], {"paths": ["src/**"]}
    )
    assert status == 200, made
    reservation_id = made["reserved"][0]["id"]
    status, released = await _http(
        broker, "POST", "/v1/me/reservations/release", mallory["token"], {"paths": ["src/**"]}
    )
    assert (status, released["released"], released["not_held"]) == (200, [], ["src/**"])
    status, _ = await _http(broker, "DELETE", "/v1/me/reservations", mallory["token"])
    assert status == 200
    status, refused = await _http(
        broker, "DELETE", f"/v1/reservations/{reservation_id}", mallory["token"]
    )
    assert (status, refused["error"]["code"]) == (401, "unauthenticated")
    async with mcp_session(broker.url, mallory["token"]) as client:
        error = tool_error(
            await client.call_tool("release", {"paths": ["src/**"], "agent_id": alice["agent_id"]})
        )
        assert error["code"] == "validation_failed"
    assert [c["id"] for c in await _check(broker, mallory["token"], "src/x.py")] == [reservation_id]


@pytest.fixture
def two_hosts(tmp_path: Path, pg_dsn: str) -> Iterator[tuple[Broker, Broker]]:
    """Brokers `alpha` and `beta` on one fresh PostgreSQL database."""
    env = {**postgres_env(pg_dsn, tmp_path), **FAST_WINDOWS, **HEARTBEAT}
    started = [_host_broker(tmp_path, name, env) for name in ("alpha", "beta")]
    yield started[0], started[1]
    for broker in started:
        broker.home.kill_all()


async def test_reservations_cross_brokers_sharing_a_store(
    two_hosts: tuple[Broker, Broker], tmp_path: Path
) -> None:
    """Two brokers (hosts alpha and beta) on one PostgreSQL store, one checkout: reserved
    through alpha, refused and reported by the check through beta, as long as it holds."""
    alpha, beta = two_hosts
    shared = tmp_path / "shared-repo"
    shared.mkdir()
    alice = await alpha.register("alice", workspace=str(shared))
    bob = await beta.register("bob", workspace=str(shared))
    status, _ = await _http(
        alpha, "POST", "/v1/me/reservations", alice["token"], {"paths": ["src/**"]}
    )
    assert status == 200
    status, refused = await _http(
        beta, "POST", "/v1/me/reservations", bob["token"], {"paths": ["src/x.py"]}
    )
    assert status == 409
    assert alice["address"] in refused["error"]["message"]
    assert [c["holder"] for c in await _check(beta, bob["token"], "src/x.py")] == [alice["address"]]
    status, _ = await _http(alpha, "DELETE", "/v1/me/reservations", alice["token"])
    assert await _check(beta, bob["token"], "src/x.py") == []
