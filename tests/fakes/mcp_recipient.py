"""FAKE agent session for crash tests: fetches with the official MCP client, prints the claims
as one JSON line, then waits to be killed without acknowledging anything.

    python -m tests.fakes.mcp_recipient URL TOKEN
"""

from __future__ import annotations

import json
import sys

import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), cache=None) as client,
    ):
        result = await client.call_tool("fetch", {"limit": 100, "wait_s": 10})
        print(json.dumps(result.structured_content), flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
