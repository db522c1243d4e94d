"""Qwen Code: a per-launch Qwen directory named by `QWEN_HOME`, with a per-launch extension
(docs/implementations/qwen.md).

Qwen Code (a Gemini CLI fork) reads the user's settings, credentials and sessions from
`$QWEN_HOME` (default `~/.qwen`; unlike Gemini CLI's home, the variable names the `.qwen`
directory itself) and loads every extension directory under its `extensions/`. The connector
builds that directory in the launch's private directory (`{config_dir}`):

    <config_dir>/<entry>                   a link to each entry of the user's own `~/.qwen`
    <config_dir>/extensions/<ext>          a link to each of the user's extensions, and
    <config_dir>/extensions/pager-launch/
        qwen-extension.json                the MCP server `pager`: `httpUrl` and the session's
                                           `Authorization` header (0600)
        hooks/hooks.json                   `pager hook --format claude` on the manifest's events
    <config_dir>/.env                      a link to `~/.env` when `~/.qwen` has none (Qwen Code
                                           reads `~/.env` only without `QWEN_HOME`)

So the user's settings file stays the one Qwen Code reads and writes (through the link), the
system settings (`/etc/qwen-code/settings.json`) apply as usual, and only this launch sees
Pager's server and hooks. Pager's own extension (`pager plugin install qwen`, the directory
`pager`) is left out of a launch: `pager-launch` replaces it.

A headless run (a wake run, `qwen --resume ID -p PROMPT`, docs/wake.md) is wired the same.
Unlike Gemini CLI, Qwen Code keeps a SessionStart hook's context apart from the prompt (in
`<qwen:session-start-context>`), so the UserPromptSubmit hook still sees the wake prompt's
`[pager]` and does not report it as typed (SPEC §8.1). Checked with Qwen Code 0.24.4 by
scripts/verify_harnesses.py.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pager.implementations.connectors.launch_home import build_config_dir, json_bytes
from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

#: Seconds Qwen Code gives each hook (its default is 60; 1000 or more would be read as ms).
HOOK_TIMEOUT = 10
#: The per-launch extension, and Pager's installed one (`pager plugin install qwen`).
EXTENSION = "pager-launch"
PLUGIN_EXTENSION = "pager"
#: The MCP server's name (Qwen Code names its tools `mcp__pager__<tool>`).
SERVER = "pager"
#: Files Qwen Code writes in place: linked even when missing, so a first write reaches the
#: user's directory.
LINKED_FILES = (
    "settings.json",
    "oauth_creds.json",
    "installation_id",
    "trustedFolders.json",
    "usage_record.jsonl",
)
#: Directories Qwen Code fills during a session (`projects/<project>/chats`: the sessions
#: that `--resume` finds): created in the user's directory when missing.
KEPT_DIRS = ("projects", "tmp")


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    directory = Path(context.directory) / "qwen-home"
    own = user_dir(context.environ)
    build_config_dir(
        own,
        directory,
        extension=EXTENSION,
        files=extension(manifest, context.values),
        linked_files=LINKED_FILES,
        kept_dirs=KEPT_DIRS,
        left_out=(PLUGIN_EXTENSION,),
    )
    home_env = own.parent / ".env"
    if own.name == ".qwen" and not os.path.lexists(directory / ".env") and home_env.exists():
        (directory / ".env").symlink_to(home_env)
    return {"config_dir": str(directory)}


def user_dir(environ: Mapping[str, str]) -> Path:
    """The directory Qwen Code would use without Pager (an enclosing launch's links to the
    user's own)."""
    given = environ.get("QWEN_HOME")
    if given:
        return Path(given)
    home = environ.get("HOME")
    return (Path(home) if home else Path(os.path.expanduser("~"))) / ".qwen"


def extension(manifest: Manifest, values: Mapping[str, str]) -> dict[str, bytes]:
    """The per-launch extension's files, by path relative to its directory."""
    config = {
        "name": EXTENSION,
        "version": "1.0.0",
        "description": "Pager, for this `pager qwen` launch only: the broker's MCP tools, and"
        " waiting mail added as context.",
        "mcpServers": {
            SERVER: {
                "httpUrl": values["mcp_url"],
                # The literal token: the file is private (0600, in a 0700 directory removed
                # after the launch).
                "headers": {"Authorization": f"Bearer {values['token']}"},
            }
        },
    }
    hooks = {"hooks": hook_groups(manifest, values)}
    return {
        "qwen-extension.json": json_bytes(config),
        os.path.join("hooks", "hooks.json"): json_bytes(hooks),
    }


def hook_groups(manifest: Manifest, values: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """One group per event running `pager hook` in the manifest's output format. `PAGER_HOME`
    is on the command itself, so the hook finds this broker whatever environment Qwen Code
    gives its hooks."""
    base = f"PAGER_HOME={shlex.quote(values['state_dir'])} {values['hook_command']}"
    fmt, limit = manifest.hooks.output, manifest.hooks.max_chars
    groups = {
        event: [
            {
                "hooks": [
                    {
                        "name": f"pager-{event}",
                        "type": "command",
                        "command": f"{base} --format {fmt} --max-chars {limit}"
                        f" {shlex.quote(event)}",
                        "timeout": HOOK_TIMEOUT,
                    }
                ]
            }
        ]
        for event in manifest.hooks.events
    }
    pre_tool = manifest.hooks.pre_tool
    if pre_tool is not None:  # before each tool call: the reservations check
        handler = {
            "name": "pager-reservations",
            "type": "command",
            "command": f"{base} {pre_tool.arguments()}",
            "timeout": HOOK_TIMEOUT,
        }
        groups.setdefault(pre_tool.event, []).append({"hooks": [handler]})
    return groups
