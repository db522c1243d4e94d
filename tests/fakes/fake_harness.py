"""FAKE harness executable for wrapper tests (installed on PATH as `claude` by the tests).

It records how it was launched and acts like a harness, step by step, as FAKE_HARNESS_STEPS
says (comma-separated): `whoami` calls the MCP endpoint from its --mcp-config with the header
it was given; `hook` runs the configured UserPromptSubmit hook command with a realistic payload
and records its output; `wait:PATH` waits until PATH exists; `exit:N` exits with N;
`signal:NAME` kills itself with that signal. Everything goes to FAKE_HARNESS_LOG as JSON lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any


def log(record: dict[str, Any]) -> None:
    with open(os.environ["FAKE_HARNESS_LOG"], "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def option(argv: list[str], name: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def whoami(config_path: str) -> dict[str, Any]:
    import httpx2
    import trio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server = read_json(config_path)["mcpServers"]["pager"]

    async def call() -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(headers=server["headers"], timeout=30) as http,
            Client(streamable_http_client(server["url"], http_client=http), cache=None) as c,
        ):
            result = await c.call_tool("whoami", {})
            return dict(result.structured_content or {})

    return trio.run(call)


def main() -> int:
    argv = sys.argv[1:]
    config = option(argv, "--mcp-config")
    settings_path = option(argv, "--settings")
    settings = read_json(settings_path) if settings_path else {}
    session = option(argv, "--session-id") or option(argv, "--resume") or "none"
    log(
        {
            "argv": argv,
            "env": {k: v for k, v in os.environ.items() if k.startswith("PAGER_")},
            "settings": settings,
            "mcp_config": read_json(config) if config else None,
        }
    )
    for step in filter(None, os.environ.get("FAKE_HARNESS_STEPS", "").split(",")):
        kind, _, arg = step.partition(":")
        if kind == "whoami":
            assert config is not None
            log({"whoami": whoami(config)})
        elif kind == "hook":
            command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
            payload = {"session_id": session, "hook_event_name": "UserPromptSubmit",
                       "cwd": os.getcwd(), "prompt": "hello"}  # fmt: skip
            done = subprocess.run(
                command, shell=True, input=json.dumps(payload), capture_output=True, text=True
            )
            log({"hook": {"status": done.returncode, "stdout": done.stdout}})
        elif kind == "wait":
            while not os.path.exists(arg):
                time.sleep(0.02)
        elif kind == "exit":
            return int(arg)
        elif kind == "signal":
            os.kill(os.getpid(), getattr(signal, arg))
            time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
