"""Property test: requests generated from `GET /v1/openapi.json` (schemathesis) against a real
broker never get a 5xx, and every response conforms to the document (status, content type,
body schema); requests built to violate it are refused with a 4xx.

A plain sync test (schemathesis drives `requests` itself). The event streams are left out:
they never end, so there is no response to check.
"""

from __future__ import annotations

from typing import Any

import hypothesis
import schemathesis
import trio
from hypothesis import strategies as st
from schemathesis.core.result import Ok

from pager.client import request_json
from tests.e2e.conftest import Broker, mcp_session, structured

#: Examples per operation and generation mode: keeps the whole test within ~30 s.
EXAMPLES = 12

#: `positive_data_acceptance` is off: a schema-valid request can still be refused for what a
#: schema cannot say (a workspace that is not an existing absolute directory, a wait beyond
#: 60 s), and such a refusal is a 400 the document lists. Every other check runs.
CONFIG = schemathesis.Config.from_dict({"checks": {"positive_data_acceptance": {"enabled": False}}})


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


def test_v1_conforms_to_its_openapi_document(broker: Broker) -> None:
    """No generated request gets a 5xx; every answer matches the document."""
    workspace = str(broker.workspace)
    agents = {}
    for name in ("alice", "bob", "carol"):
        body = {"workspace": workspace, "implementation": "shell", "session_name": name}
        agents[name] = _call(broker, "POST", "/v1/register", body)
    known = [agent["agent_id"] for agent in agents.values()]
    trio.run(_exchange, broker.url, agents["alice"]["token"], agents["bob"]["token"])
    document = _call(broker, "GET", "/v1/openapi.json")
    schema = schemathesis.openapi.from_dict(document, config=CONFIG).exclude(path_regex=r"/events$")
    secret = {"Authorization": f"Bearer {broker.secret}"}
    session = {"Authorization": f"Bearer {agents['carol']['token']}"}
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # every operation of the document loads
        operations.append(result.ok())
    assert len(operations) >= 11

    for operation in operations:
        uses_session = operation.path.startswith("/v1/sessions/")
        headers = session if uses_session else secret
        described = document["paths"][operation.path][operation.method.lower()]
        modes = [schemathesis.GenerationMode.POSITIVE]
        if "parameters" in described or "requestBody" in described:  # something to violate
            modes.append(schemathesis.GenerationMode.NEGATIVE)
        for mode in modes:
            _fuzz(operation, mode, broker.url, headers, known)


def _fuzz(
    operation: schemathesis.APIOperation[Any, Any, Any, Any],
    mode: schemathesis.GenerationMode,
    url: str,
    headers: dict[str, str],
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
        case.call_and_validate(base_url=url, headers=headers, timeout=30)

    check()
