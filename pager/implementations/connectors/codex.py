"""Codex CLI: per-launch wiring through `-c key=value` overrides only
(docs/implementations/codex.md).

The built-in manifest passes the MCP server as two overrides (`mcp_servers.pager.url` and
`bearer_token_env_var = "PAGER_TOKEN"`), so the token never appears on the command line; that
needs no file. This connector also builds `{config_content}`: Pager's hooks as one TOML override,

    hooks={SessionStart=[{hooks=[{type="command",command="… pager hook …",timeout=30}]}], …}

Codex reads hooks from every config layer, the `-c` (session flags) layer included, so the
built-in manifest's `"-c", "{config_content}"` gives Pager's hooks to that launch only (checked
with Codex 0.171.0 by scripts/verify_harnesses.py: listed with source `sessionFlags`, run once
trusted, `pager hook` finds the session through the `PAGER_TOKEN` it inherits, and the
SessionStart output reaches the model as a developer message). Codex runs a new hook only after
the user reviewed and trusted it (its hash, stored in ~/.codex/config.toml); the command has no
per-launch part, so one review lasts.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: Seconds Codex gives each hook (its default is 600); `pager hook` answers within ~5 s.
HOOK_TIMEOUT_S = 30

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    return {"config_content": "hooks=" + toml_value(hooks_table(manifest, context))}


def hooks_table(manifest: Manifest, context: LaunchContext) -> dict[str, Any]:
    """Codex's hooks schema (the one of hooks.json): event → matcher groups → handlers."""
    base = context.values["hook_command"]
    fmt, limit = manifest.hooks.output, manifest.hooks.max_chars
    table: dict[str, Any] = {}
    for event in manifest.hooks.events:
        command = f"{base} --format {fmt} --max-chars {limit} {shlex.quote(event)}"
        handler = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}
        table[event] = [{"hooks": [handler]}]
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:  # before each tool call: the reservations check
        handler = {
            "type": "command",
            "command": f"{base} {pre_tool.arguments()}",
            "timeout": HOOK_TIMEOUT_S,
        }
        table.setdefault(pre_tool.event, []).append({"hooks": [handler]})
    return table


def toml_value(value: Any) -> str:
    """`value` as one TOML inline value (what `codex -c key=VALUE` parses)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{_toml_key(str(key))}={toml_value(item)}" for key, item in value.items())
        return "{" + ",".join(items) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
