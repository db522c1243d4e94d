"""`pager status` reports the broker's counts (issue 5): agents, attached sessions, mail."""

from __future__ import annotations

import json

import trio

from tests.e2e.conftest import Broker, mcp_session, structured


async def test_status_counts_agents_sessions_and_mail(broker: Broker) -> None:
    """Two attached agents in one workspace, one detached, one message waiting: `status
    --json` counts them, and the human output says the same."""
    with trio.fail_after(60):
        alice = await broker.register("alice")
        await broker.register("bob")
        carol = await broker.register("carol")
        status, _ = await broker.post("/v1/sessions/current/detach", {}, token=carol["token"])
        assert status == 200
        async with mcp_session(broker.url, alice["token"]) as client:
            structured(await client.call_tool("send", {"to": "bob", "body": "hi"}))
    result = broker.home.run("status", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["url"], report["mcp_url"]) == (broker.url, broker.url + "/mcp")
    counts = report["counts"]
    assert counts == {
        "workspaces": 1,
        "agents": 3,
        "attached": 2,
        "archived": 0,
        "queued": 1,
        "claimed": 0,
        "dead": 0,
    }
    human = broker.home.run("status").stdout
    assert "3 in 1 workspaces, 2 attached, 0 archived" in human
    assert "1 waiting, 0 claimed, 0 dead" in human
    # Both addresses: the broker's for /v1 and curl (docs/paging.md), and the MCP endpoint.
    assert f"  broker        {broker.url}  (/v1, curl)\n" in human
    assert f"  MCP endpoint  {broker.url}/mcp\n" in human


def test_status_with_a_replaced_secret_does_not_trust_the_broker(broker: Broker) -> None:
    """A secret the broker does not know (replaced on disk): the broker cannot prove itself,
    so `status` sends it nothing and says why, naming the pid to stop (docs/security.md)."""
    (broker.home.root / "secret").write_text("not-the-broker-secret\n")
    result = broker.home.run("status", "--json")
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert report["running"] is False
    assert "did not prove that it is this user's broker" in report["reason"]
    assert "secret file was replaced after broker pid" in report["reason"]
