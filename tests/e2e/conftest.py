"""A real broker process (`pager start`) with windows in milliseconds, real HTTP, and the
official MCP SDK client."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.launch.conftest import PagerHome

#: Windows short enough that whole lifecycles run in about a second.
FAST_WINDOWS = {
    "PAGER_WINDOW_ACK_WAIT": "600ms",
    "PAGER_WINDOW_REDELIVERY": "200ms",
    "PAGER_WINDOW_LEASE_TTL": "30s",
}
#: For tests that send in bulk (SPEC §8.1: load tests turn the send limits off explicitly).
NO_SEND_LIMITS = {
    "PAGER_LIMIT_MAX_HOPS": "0",
    "PAGER_LIMIT_AGENT_SENDS_PER_HOUR": "0",
    "PAGER_LIMIT_PAIR_SENDS_PER_HOUR": "0",
}


@attrs.define
class Broker:
    home: PagerHome
    url: str
    secret: str
    workspace: Path

    def db_rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.home.root / 'pager.db'}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    async def register(self, name: str | None = None, **fields: Any) -> dict[str, Any]:
        body = {"workspace": str(self.workspace), "implementation": "shell", **fields}
        if name is not None:
            body["session_name"] = name
        status, answer = await self.post("/v1/register", body, token=self.secret)
        assert status == 201, answer
        return answer

    async def post(
        self, path: str, body: object, *, token: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(self.url + path, json=body, headers=headers)
        return response.status_code, response.json()


def start_broker(home: PagerHome, workspace: Path, **env: str) -> Broker:
    """`pager start` on `home` with `env` added to its environment (e.g. PAGER_WINDOW_*);
    `workspace` is created if missing. Stop it with `home.kill_all()`."""
    home.env.update(env)
    started = home.run("start", "--json")
    assert started.returncode == 0, started.stderr
    url = str(json.loads(started.stdout)["url"])
    workspace.mkdir(exist_ok=True)
    secret = (home.root / "secret").read_text().strip()
    return Broker(home, url, secret, workspace)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    home = PagerHome(tmp_path / "home")
    yield start_broker(home, tmp_path / "repo", **FAST_WINDOWS)
    home.kill_all()


@asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[Client]:
    """The official MCP client on /mcp with the session token as its static header."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def tool_error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    error: dict[str, Any] = json.loads(text)
    return error


ROOT = Path(__file__).parents[2]
#: The harnesses the FAKE programs of `fakes` stand in for.
KINDS = ("codex", "gemini", "opencode", "pi")


@pytest.fixture
def places(broker: Broker, tmp_path: Path) -> dict[str, Path]:
    """Two repositories (Git checkouts) and the person's own directory."""
    found = {}
    for name in ("api", "web", "desk"):
        path = tmp_path / name
        path.mkdir()
        if name != "desk":
            subprocess.run(["git", "init", "-q", str(path)], check=True)
        found[name] = path
    return found


@pytest.fixture
def fakes(tmp_path: Path, broker: Broker) -> Path:
    """Puts FAKE `codex`, `gemini`, `opencode` and `pi` first on PATH; yields their log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for kind in KINDS:
        shim = bin_dir / kind
        shim.write_text(
            f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m"
            f' tests.fakes.fake_harness_generic {kind} "$@"\n'
        )
        shim.chmod(0o755)
    log = tmp_path / "harness.log"
    env = broker.home.env
    env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    env["FAKE_HARNESS_LOG"] = str(log)
    # Hermetic: a home of its own (the Gemini connector links and creates entries of the
    # user's ~/.gemini), no inline OpenCode config or user manifests of this host.
    env["HOME"] = str(tmp_path / "user-home")
    (tmp_path / "user-home").mkdir()
    for name in ("GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "OPENCODE_CONFIG_CONTENT"):
        env.pop(name, None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return log
