"""Claude Code: an MCP config with the session's bearer header, and hook settings, both as
per-launch files (`--mcp-config`, `--settings`); the user's own settings are untouched."""

from __future__ import annotations

import json
import os
from typing import Any

from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: Seconds a background wake hook waits for mail before it ends quietly.
WAIT_MAX = 3600


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    values = context.values
    mcp = {
        "mcpServers": {
            "pager": {
                "type": "http",
                "url": values["mcp_url"],
                # The literal token: Claude Code 2.1.332 expands ${VAR} in --mcp-config files,
                # older versions are not known to.
                "headers": {"Authorization": f"Bearer {values['token']}"},
            }
        }
    }
    hook = (
        f"{values['hook_command']} --format {manifest.hooks.output}"
        f" --max-chars {manifest.hooks.max_chars}"
    )
    hooks: dict[str, list[dict[str, Any]]] = {
        event: [{"hooks": [{"type": "command", "command": f"{hook} {event}"}]}]
        for event in manifest.hooks.events
    }
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:  # before each tool call: the reservations check
        command = f"{values['hook_command']} {pre_tool.arguments()}"
        hooks.setdefault(pre_tool.event, []).append(
            {"hooks": [{"type": "command", "command": command}]}
        )
    # Idle wake: a background hook waits for mail once a turn ends (and from the start);
    # exiting 2 makes Claude Code wake the session with the hook's stderr (`asyncRewake`).
    # Not in a headless run (a wake run, `claude -p`): nobody waits for a next turn there, and
    # Claude Code waits for its background hooks before exiting (Claude Code 2.1.332: 30 s,
    # then it kills them), so a waiter would only hold the run open and could claim mail that
    # arrives meanwhile for nothing.
    if not context.headless:
        for event in ("SessionStart", "Stop"):
            waiter = {
                "type": "command",
                "command": f"{hook} --wait --wait-max {WAIT_MAX} {event}",
                "async": True,
                "asyncRewake": True,
                "timeout": WAIT_MAX + 60,
            }
            hooks.setdefault(event, []).append({"hooks": [waiter]})
    settings: dict[str, Any] = {"hooks": hooks}
    return {
        "mcp_config_file": _write(context.directory, "mcp.json", mcp),
        "settings_file": _write(context.directory, "settings.json", settings),
    }


def _write(directory: str, name: str, data: dict[str, Any]) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(data, file, indent=2)
    return path
