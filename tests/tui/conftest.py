"""A real broker (`pager start` in a private PAGER_HOME) for the TUI's acceptance tests, with
sync helpers: the tests run Textual on their own asyncio loop, not under trio."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pager.client import request_json
from tests.launch.conftest import PagerHome


@dataclass
class RealBroker:
    home: PagerHome
    url: str
    secret: str
    root: Path

    def workspace(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(exist_ok=True)
        return path

    def register(self, workspace: Path, name: str, implementation: str = "shell") -> dict[str, Any]:
        body = {"workspace": str(workspace), "implementation": implementation, "session_name": name}
        status, answer = request_json(
            self.url, "POST", "/v1/register", token=self.secret, body=body, timeout=30
        )
        assert status == 201, answer
        assert isinstance(answer, dict)
        return answer

    def send(self, sender: dict[str, Any], to: str, body: str) -> dict[str, Any]:
        """`send` over MCP (JSON-RPC on /mcp with the sender's session token)."""
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "send", "arguments": {"to": to, "body": body}},
        }
        request = urllib.request.Request(
            f"{self.url}/mcp",
            data=json.dumps(call).encode(),
            headers={
                "Authorization": f"Bearer {sender['token']}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        assert not answer["result"]["isError"], answer
        result: dict[str, Any] = answer["result"]["structuredContent"]
        return result

    def has_operator_routes(self) -> bool:
        status, _ = request_json(self.url, "GET", "/v1/snapshot", token=self.secret, timeout=30)
        return status == 200


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PagerHome]:
    pager_home = PagerHome(tmp_path / "home")
    yield pager_home
    pager_home.kill_all()


@pytest.fixture
def real_broker(home: PagerHome, tmp_path: Path) -> RealBroker:
    started = home.run("start", "--json")
    assert started.returncode == 0, started.stderr
    url = str(json.loads(started.stdout)["url"])
    secret = (home.root / "secret").read_text().strip()
    return RealBroker(home, url, secret, tmp_path)
