"""GitHub Copilot CLI: a user-level hooks file, and the MCP server `pager mcp` in the user's
MCP configuration, for sessions started without `pager copilot`.

    ~/.copilot/hooks/pager.json      `pager hook` on the manifest's [hooks] events (Pager's file)
    ~/.copilot/mcp-config.json       mcpServers.pager: `pager mcp` over stdio, which reads the
                                     session's id from COPILOT_AGENT_SESSION_ID (the user's
                                     file: `pager setup` adds the entry; `pager plugin install`
                                     prints the `copilot mcp add` command instead)

Copilot CLI 1.0.102 runs the hooks of every `*.json` file in `~/.copilot/hooks/` (layout
`{"version": 1, "hooks": {EVENT: [{"type": "command", "bash": …}]}}`, payloads naming the
session `sessionId`), and starts the servers of `~/.copilot/mcp-config.json` (what `copilot
mcp add` writes). With `COPILOT_HOME` set, both live there instead. Copilot CLI's own plugin
installer takes no local directory (a marketplace, a GitHub repository or a git URL only),
hence files rather than a plugin. Sources: docs/implementations/copilot.md.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import cast

from pager.implementations.manifest import Manifest
from pager.install.entries import Entry
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._json import dump

SERVER = "pager"
#: What Copilot CLI 1.0.102 names the session in its MCP servers' environment (the hooks'
#: `sessionId`): `pager mcp` binds it, so that the hooks find the identity it registered.
SESSION_ENV = "COPILOT_AGENT_SESSION_ID"
HOOKS_FILE = "pager.json"
#: Seconds Copilot CLI gives each hook.
HOOK_TIMEOUT_S = 10


def copilot_home(context: PluginContext) -> Path:
    """`$COPILOT_HOME` when set to an absolute path, else `~/.copilot`."""
    own = context.environ.get("COPILOT_HOME")
    return Path(own) if own and os.path.isabs(own) else context.home / ".copilot"


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    home = copilot_home(context)
    hooks_file = home / "hooks" / HOOKS_FILE
    hooks = {
        "version": 1,
        "hooks": {
            event: [{"type": "command", "bash": line, "timeoutSec": HOOK_TIMEOUT_S}]
            for event, line in context.hook_commands(manifest).items()
        },
    }
    server = context.mcp_server(manifest)
    command = str(server["command"])
    args = [*cast(list[str], server["args"]), "--conversation-key-env", SESSION_ENV]
    mcp_config = home / "mcp-config.json"
    entry = Entry(
        mcp_config,
        ("mcpServers", SERVER),
        {"type": "local", "command": command, "args": args, "tools": ["*"]},
    )
    add = shlex.join(["copilot", "mcp", "add", SERVER, "--", command, *args])
    return PluginPlan(
        location=hooks_file,
        files=(Planned(hooks_file, dump(hooks)),),
        next_steps=(
            "Add Pager's MCP server to Copilot CLI (once):",
            f"  {add}",
            "Copilot CLI runs the hooks at its next start.",
        ),
        entries=(entry,),
        entries_steps=(
            f"Copilot CLI starts the `{SERVER}` server of {context.tilde(mcp_config)} and runs"
            f" the hooks of {context.tilde(hooks_file)} at its next start.",
        ),
        uninstall_steps=(
            "If you added Pager's MCP server with `copilot mcp add`, remove it too:",
            f"  copilot mcp remove {SERVER}",
        ),
        notes=(
            "Sessions started without `pager copilot` get mail at each prompt (the hooks) and"
            " Pager's tools; idle wake needs `pager copilot`.",
        ),
    )
