"""FAKE harness executable for wrapper tests (installed on PATH as `claude` by the tests).

Launched headless with `-p --resume KEY PROMPT` (a wake run, docs/wake.md), it does what
FAKE_WAKE says (`headless`, below). Otherwise it records how it was launched and acts like a
harness, step by step, as FAKE_HARNESS_STEPS says (comma-separated): `whoami` calls the MCP
endpoint from its --mcp-config with the header it was given; `hook` runs the configured
UserPromptSubmit hook command with a realistic payload and records its output; `wait:PATH`
waits until PATH exists; `exit:N` exits with N; `signal:NAME` kills itself with that signal;
`reserve:PATTERN` and `release` run `pager reserve`/`pager release` as its agent's shell tool
would; `edit:PATH` asks the PreToolUse hooks about an Edit of PATH as Claude Code does, and
writes the file only when no hook denied it. Everything goes to FAKE_HARNESS_LOG as JSON lines.
"""

from __future__ import annotations

import json
import os
import re
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


def run_hook(command: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, shell=True, input=json.dumps(payload), capture_output=True, text=True
    )


def pager(*args: str) -> subprocess.CompletedProcess[str]:
    """The `pager` CLI of the venv this harness runs with (as an agent's shell tool would)."""
    program = os.path.join(os.path.dirname(sys.executable), "pager")
    return subprocess.run([program, *args], capture_output=True, text=True)


def edit_file(settings: dict[str, Any], session: str, path: str) -> dict[str, Any]:
    """An Edit of `path` as Claude Code runs it: each PreToolUse hook first; a `deny` decision
    refuses it (the file untouched), otherwise the edit is written."""
    payload = {"session_id": session, "hook_event_name": "PreToolUse", "cwd": os.getcwd(),
               "tool_name": "Edit", "tool_input": {"file_path": path, "old_string": "",
                                                   "new_string": "B was here"}}  # fmt: skip
    for group in settings.get("hooks", {}).get("PreToolUse", []):
        for hook in group["hooks"]:
            done = run_hook(hook["command"], payload)
            if done.stdout.strip():
                decided = json.loads(done.stdout)["hookSpecificOutput"]
                if decided.get("permissionDecision") == "deny":
                    return {"denied": True, "reason": decided["permissionDecisionReason"]}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write("B was here\n")
    return {"denied": False}


def senders(text: str) -> list[str]:
    """The addresses mail in Pager's envelope came from (`From "ADDRESS" · sent …`)."""
    return re.findall(r'^From "([^"\\]+)" ·', text, flags=re.MULTILINE)


def headless(argv: list[str], settings: dict[str, Any], key: str) -> int:
    """A wake run as FAKE_WAKE says: `reply` (the default) runs the SessionStart and
    UserPromptSubmit hooks with the prompt, reads what is left with `pager read`, and replies
    to each sender with `pager send` (FAKE_WAKE_REPLY: the body; none when empty); `hang`
    never ends; `stubborn` never ends and ignores SIGTERM; `exit:N` ends with N at once.
    With FAKE_WAKE_DETACH=PATH it first leaves a helper outside its process group (`setsid`,
    as a harness's tool may) and writes the helper's pid into PATH."""
    mode = os.environ.get("FAKE_WAKE", "reply")
    log({"wake": mode, "pid": os.getpid(), "pgid": os.getpgrp(), "resume": key,
         "cwd": os.getcwd(), "prompt": argv[-1]})  # fmt: skip
    detach = os.environ.get("FAKE_WAKE_DETACH")
    if detach:
        helper = f"sleep 301 & echo $! > {detach}.tmp; mv {detach}.tmp {detach}; wait"
        subprocess.Popen(["setsid", "sh", "-c", helper], stdout=subprocess.DEVNULL)
    if mode.startswith("exit:"):
        return int(mode.removeprefix("exit:"))
    if mode in ("hang", "stubborn"):
        if mode == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            signal.pause()  # until killed (a SIGTERM it ignores wakes it: pause again)
    text = ""
    for event, prompt in (("SessionStart", None), ("UserPromptSubmit", argv[-1])):
        for group in settings.get("hooks", {}).get(event, []):
            for hook in group["hooks"]:
                if hook.get("async"):
                    continue  # a background waiter: headless runs have none
                payload = {"session_id": key, "hook_event_name": event, "cwd": os.getcwd()}
                if prompt is not None:
                    payload["prompt"] = prompt
                done = run_hook(hook["command"], payload)
                log({"hook": event, "status": done.returncode, "stdout": done.stdout})
                if done.stdout.strip():
                    text += json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    read = pager("read", "--json")
    log({"read": read.returncode, "stdout": read.stdout, "stderr": read.stderr})
    found = senders(text)
    if read.returncode == 0:
        found += [json.loads(line)["message"]["from"] for line in read.stdout.splitlines()]
    body = os.environ.get("FAKE_WAKE_REPLY", "re: done")
    for sender in dict.fromkeys(found) if body else ():
        sent = pager("send", sender, body)
        log({"replied": sender, "status": sent.returncode, "stderr": sent.stderr})
    return 0


def main() -> int:
    argv = sys.argv[1:]
    config = option(argv, "--mcp-config")
    settings_path = option(argv, "--settings")
    settings = read_json(settings_path) if settings_path else {}
    session = option(argv, "--session-id") or option(argv, "--resume") or "none"
    if "-p" in argv and option(argv, "--resume"):
        log({"argv": argv, "env": {k: v for k, v in os.environ.items() if k.startswith("PAGER_")}})
        return headless(argv, settings, session)
    log(
        {
            "argv": argv,
            "pid": os.getpid(),
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
        elif kind == "reserve":
            done = pager("reserve", arg, "--reason", "refactor", "--json")
            log({"reserve": arg, "status": done.returncode, "stdout": done.stdout})
        elif kind == "release":
            done = pager("release")
            log({"release": done.returncode})
        elif kind == "edit":
            log({"edit": arg, **edit_file(settings, session, arg)})
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
