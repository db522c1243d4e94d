"""Gemini CLI: one per-launch *system settings* file, named by `GEMINI_CLI_SYSTEM_SETTINGS_PATH`
(docs/implementations/gemini.md).

The file carries `mcpServers.pager` (`httpUrl` and the session's `Authorization` header) and
Pager's hooks (`pager hook --format gemini` on the manifest's events). Gemini CLI reads the
system settings file *instead of* the administrator's one (`/etc/gemini-cli/settings.json` on
Linux), and looks for `system-defaults.json` next to it unless `GEMINI_CLI_SYSTEM_DEFAULTS_PATH`
is set. So that a launch through Pager loses neither, the connector starts from the settings
file Gemini CLI would otherwise have read and adds Pager's entries to it, and copies the system
defaults file next to its own. The user's `~/.gemini/settings.json` and the project's settings
are untouched (Gemini CLI merges them under the system file as usual).

The file holds the session token literally: it is private (0600, in a 0700 directory removed
after the launch), and that works whether or not Gemini CLI expands `$VAR` in this layer.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: Milliseconds Gemini CLI gives each hook (its default is 60 000).
HOOK_TIMEOUT_MS = 10_000

#: Where Gemini CLI reads the system settings when `GEMINI_CLI_SYSTEM_SETTINGS_PATH` is unset.
DEFAULT_SYSTEM_SETTINGS = {
    "darwin": "/Library/Application Support/GeminiCli/settings.json",
    "linux": "/etc/gemini-cli/settings.json",
}


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    values = context.values
    settings = system_settings(os.environ)
    servers = settings.get("mcpServers")
    if not isinstance(servers, dict):
        servers = settings["mcpServers"] = {}
    servers["pager"] = {
        "httpUrl": values["mcp_url"],
        "headers": {"Authorization": f"Bearer {values['token']}"},
    }
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        hooks = settings["hooks"] = {}
    for event, group in hook_groups(manifest, values).items():
        existing = hooks.get(event)
        kept = [g for g in existing if not _is_pagers(g)] if isinstance(existing, list) else []
        hooks[event] = [*kept, group]
    _copy_system_defaults(os.environ, context.directory)
    path = os.path.join(context.directory, "settings.json")
    _write_private(path, json.dumps(settings, indent=2).encode())
    return {"settings_file": path}


def hook_groups(manifest: Manifest, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """One matcher group per event, running `pager hook` in Gemini's JSON output format.

    `PAGER_HOME` is set on the command itself: Gemini CLI may run hooks with a sanitized
    environment (its opt-in redaction, always on in GitHub Actions), and the hook must still find
    this broker."""
    base = f"PAGER_HOME={shlex.quote(values['state_dir'])} {values['hook_command']}"
    fmt, limit = manifest.hooks.output, manifest.hooks.max_chars
    return {
        event: {
            "hooks": [
                {
                    "name": f"pager-{event}",
                    "type": "command",
                    "command": f"{base} --format {fmt} --max-chars {limit} {shlex.quote(event)}",
                    "timeout": HOOK_TIMEOUT_MS,
                    "description": "Pager: waiting mail for this session, as context",
                }
            ]
        }
        for event in manifest.hooks.events
    }


def system_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings of the system settings file Gemini CLI would read without Pager, or {}."""
    path = _original_system_settings_path(environ)
    if path is None or not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as file:
            data = json.loads(strip_json_comments(file.read()))
    except (OSError, ValueError) as exc:
        print(
            f"pager: cannot read Gemini CLI's system settings {path} ({exc}); this session runs"
            " without them",
            file=sys.stderr,
        )
        return {}
    return data if isinstance(data, dict) else {}


def _original_system_settings_path(environ: Mapping[str, str]) -> str | None:
    given = environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
    if given:  # the user's own, or an enclosing `pager gemini`'s (its Pager entries are replaced)
        return given
    return DEFAULT_SYSTEM_SETTINGS.get("darwin" if sys.platform == "darwin" else "linux")


def _is_pagers(group: object) -> bool:
    """A hook group this connector wrote (for an enclosing `pager gemini`)."""
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(handlers, list) and any(
        isinstance(h, dict) and str(h.get("name", "")).startswith("pager-") for h in handlers
    )


def _copy_system_defaults(environ: Mapping[str, str], directory: str) -> None:
    """Gemini CLI looks for `system-defaults.json` beside the system settings file unless
    `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` names it (then it is inherited and nothing is needed)."""
    if environ.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"):
        return
    settings = _original_system_settings_path(environ)
    if settings is None:
        return
    source = os.path.join(os.path.dirname(settings), "system-defaults.json")
    try:
        with open(source, "rb") as file:
            content = file.read()
    except OSError:
        return
    _write_private(os.path.join(directory, "system-defaults.json"), content)


def strip_json_comments(text: str) -> str:
    """JSON with `//` and `/* */` comments (as Gemini CLI accepts) → plain JSON."""
    out: list[str] = []
    index, length, in_string = 0, len(text), False
    while index < length:
        char = text[index]
        if in_string:
            out.append(char)
            if char == "\\" and index + 1 < length:
                out.append(text[index + 1])
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif text.startswith("//", index):
            end = text.find("\n", index)
            index = length if end < 0 else end
            continue
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            index = length if end < 0 else end + 2
            continue
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _write_private(path: str, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(content)
