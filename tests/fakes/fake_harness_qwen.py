"""FAKE `qwen` (Qwen Code) for wrapper tests: `python -m tests.fakes.fake_harness_qwen
[harness args…]` (tests/e2e/test_wrapper_qwen.py puts a shim named `qwen` on PATH).

It records how it was launched — argv, the Pager-relevant environment, the per-launch
extension's files (content and mode, read while it runs) and the entries of its Qwen directory
(`$QWEN_HOME`, else `~/.qwen`) — and then acts like Qwen Code 0.24, step by step, as
FAKE_HARNESS_STEPS says (comma-separated):

- `mcp`: calls the MCP tool `whoami` from `mcpServers.pager` as Qwen Code merges it (the user's
  settings over the extensions under `extensions/` that hold a `qwen-extension.json`);
- `hook:EVENT`: runs the hook command configured for EVENT (settings and extensions' `hooks`)
  with Qwen Code's payload (`session_id`, `hook_event_name`, `prompt` on UserPromptSubmit),
  recording its exit status and output;
- `input`: as the idle TUI with `--input-file F`: waits for a line in F (read from its start,
  as appended), and for a `{"type": "submit", "text": …}` line runs the UserPromptSubmit hook
  with `prompt` that text;
- `wait:PATH`, `exit:N` as in tests/fakes/fake_harness_generic.py.

Everything goes to FAKE_HARNESS_LOG as JSON lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.fakes.fake_harness_generic import call_tool, file_record, loads_jsonc, log, option


def qwen_dir() -> Path:
    """Qwen Code's directory: `$QWEN_HOME` (the `.qwen` directory itself), else `~/.qwen`."""
    given = os.environ.get("QWEN_HOME")
    return Path(given) if given else Path(os.path.expanduser("~")) / ".qwen"


def extensions() -> list[Path]:
    """The extension directories Qwen Code loads: each under `extensions/` holding a
    `qwen-extension.json` (links followed)."""
    root = qwen_dir() / "extensions"
    found = sorted(root.iterdir()) if root.is_dir() else []
    return [directory for directory in found if (directory / "qwen-extension.json").is_file()]


def settings() -> dict[str, Any]:
    """`mcpServers` (the user's settings over extensions) and `hooks` (from all of them)."""
    layers: list[dict[str, Any]] = []
    for directory in extensions():
        layer = json.loads((directory / "qwen-extension.json").read_text())
        hooks = directory / "hooks" / "hooks.json"
        if hooks.is_file():
            layer["hooks"] = json.loads(hooks.read_text())["hooks"]
        layers.append(layer)
    user = qwen_dir() / "settings.json"
    if user.is_file():
        layers.append(loads_jsonc(user.read_text()))
    merged: dict[str, Any] = {"mcpServers": {}, "hooks": {}}
    for layer in layers:
        merged["mcpServers"].update(layer.get("mcpServers", {}))
        for event, groups in layer.get("hooks", {}).items():
            merged["hooks"].setdefault(event, []).extend(groups)
    return merged


def home_entries() -> dict[str, str]:
    """Each entry of the Qwen directory and of its `extensions/` → `link:TARGET`, `dir` or
    `file`."""
    root = qwen_dir()
    entries: dict[str, str] = {}
    for path in [*root.iterdir(), *(root / "extensions").iterdir()]:
        key = str(path.relative_to(root))
        if path.is_symlink():
            entries[key] = f"link:{os.readlink(path)}"
        else:
            entries[key] = "dir" if path.is_dir() else "file"
    return entries


def launch_files() -> list[str]:
    """The per-launch extension's files (not the user's own, which are links)."""
    return [
        str(path)
        for directory in extensions()
        if not directory.is_symlink()
        for path in (directory / "qwen-extension.json", directory / "hooks" / "hooks.json")
        if path.exists()
    ]


def run_hook(event: str, session: str, prompt: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(qwen_dir() / "projects" / "p" / "chats" / f"{session}.jsonl"),
        "cwd": os.getcwd(),
        "hook_event_name": event,
        "timestamp": datetime.now(UTC).isoformat(),
    }
    if event == "UserPromptSubmit":
        payload["prompt"] = prompt or os.environ.get("FAKE_QWEN_PROMPT", "hello")
    if event == "SessionStart":
        payload["source"] = "startup"
    groups = settings()["hooks"][event]
    commands = [h["command"] for g in groups for h in g["hooks"] if "pager" in h["command"]]
    done = subprocess.run(
        ["/bin/sh", "-c", commands[-1]],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return {"event": event, "command": commands[-1], "status": done.returncode,
            "stdout": done.stdout, "stderr": done.stderr, "session_id": session}  # fmt: skip


#: Seconds the fake waits for the wrapper to append a whole line to its input file.
INPUT_BOUND = 60.0


def submitted(argv: list[str], session: str) -> dict[str, Any]:
    """The next line of the `--input-file`, and the hook run for it when it is a submit."""
    path = Path(option(argv, "--input-file") or "")
    offset = int(os.environ.get("FAKE_QWEN_INPUT_OFFSET", "0"))
    deadline = time.monotonic() + INPUT_BOUND
    while True:
        with path.open("rb") as file:
            file.seek(offset)
            line = file.readline()
        if line.endswith(b"\n"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"no whole line in {path} within {INPUT_BOUND:.0f} s")
        time.sleep(0.02)  # paces the reads of a file the wrapper appends to
    os.environ["FAKE_QWEN_INPUT_OFFSET"] = str(offset + len(line))
    entry = json.loads(line)
    record: dict[str, Any] = {"line": entry, "mode": path.stat().st_mode & 0o777}
    if entry.get("type") == "submit":
        record["hook"] = run_hook("UserPromptSubmit", session, entry["text"])
    return record


def main() -> int:
    argv = sys.argv[1:]
    log(
        {
            "kind": "qwen",
            "argv": argv,
            "cwd": os.getcwd(),
            "env": {
                key: value
                for key, value in os.environ.items()
                if key.startswith("PAGER_") or key == "QWEN_HOME"
            },
            "files": {path: file_record(path) for path in launch_files()},
            **({"qwen_home": home_entries()} if "QWEN_HOME" in os.environ else {}),
        }
    )
    session = option(argv, "--session-id") or option(argv, "--resume") or "session-unknown"
    for step in filter(None, os.environ.get("FAKE_HARNESS_STEPS", "").split(",")):
        name, _, arg = step.partition(":")
        if name == "mcp":
            server = settings()["mcpServers"]["pager"]
            log({"mcp": call_tool(server["httpUrl"], server.get("headers", {}), "whoami", {})})
        elif name == "hook":
            log({"hook": run_hook(arg, session)})
        elif name == "input":
            log({"input": submitted(argv, session)})
        elif name == "wait":
            while not os.path.exists(arg):
                time.sleep(0.02)
        elif name == "exit":
            return int(arg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
