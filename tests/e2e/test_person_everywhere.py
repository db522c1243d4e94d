"""The person is reachable by name from every workspace: an agent's send to the person's alias
from a workspace where the person never ran a command reaches the person's identity there
(made as the person's own first command there would make it), through every edge (MCP
`send`, `/v1/me/send`, the CLI); a name that is not the person's is still refused, and makes
no identity."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.e2e.conftest import Broker, mcp_session, structured
from tests.e2e.test_everyday_cli import answer, pager


async def test_a_send_to_the_persons_name_reaches_them_in_any_workspace(
    broker: Broker, places: dict[str, Path], tmp_path: Path
) -> None:
    with trio.fail_after(60):
        me = answer(pager(broker, places["desk"], "whoami", "--json"))  # the person: desk only
        name = me["alias"]
        ops = tmp_path / "ops"
        ops.mkdir()
        alice = await broker.register("alice", workspace=str(places["api"]))
        bob = await broker.register("bob", workspace=str(places["web"]))
        carol = await broker.register("carol", workspace=str(ops))
        async with mcp_session(broker.url, alice["token"]) as client:
            by_mcp = structured(await client.call_tool("send", {"to": name, "body": "by mcp"}))
        status, by_v1 = await broker.post(
            "/v1/me/send", {"to": name.upper(), "body": "by v1"}, token=bob["token"]
        )
        assert status == 200, by_v1
        by_cli = answer(pager(broker, ops, "send", name, "by cli", "--json",
                              PAGER_TOKEN=carol["token"]))  # fmt: skip
        for sent, sender, place in ((by_mcp, alice, places["api"]), (by_v1, bob, places["web"]),
                                    (by_cli, carol, ops)):  # fmt: skip
            slug = sender["address"].split("@", 1)[1]
            assert sent["recipient"]["address"] == f"{name}@{slug}"
            assert sent["recipient"]["implementation"] == "human"
            # The same identity the person's own commands there act as, with the mail waiting.
            there = answer(pager(broker, place, "whoami", "--json"))
            assert there["agent_id"] == sent["recipient"]["agent_id"]
            [line] = pager(broker, place, "read", "--json").stdout.splitlines()
            assert answer_line(line)["from"] == sender["address"]
        identities = await broker.identities()
        people = [i for i in identities if i["implementation"] == "human"]
        assert len(people) == 4  # desk, api, web, ops: one each

        # Any other unknown name is refused as before, and makes nothing.
        before = await broker.identities()
        status, refused = await broker.post(
            "/v1/me/send", {"to": f"{name}x", "body": "hi"}, token=alice["token"]
        )
        assert (status, refused["error"]["code"]) == (404, "unknown_recipient"), refused
        assert await broker.identities() == before


def answer_line(line: str) -> dict[str, object]:
    import json

    message = json.loads(line)["message"]
    assert isinstance(message, dict)
    return message
