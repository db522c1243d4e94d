"""Qwen Code: an extension directory, which Qwen Code loads on its next start.

    ~/.qwen/extensions/pager/
      qwen-extension.json                          name, version, the stdio MCP server `pager mcp`
      hooks/hooks.json                             `pager hook` on the manifest's [hooks] events

Qwen Code (a Gemini CLI fork) reads every directory under `~/.qwen/extensions/` that holds a
`qwen-extension.json`, and an extension's hooks from its `hooks/hooks.json` (the layout Claude
Code's hooks use). Sources: docs/implementations/qwen.md.
"""

from __future__ import annotations

from pager.implementations.manifest import Manifest
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._json import command_hooks, dump

EXTENSION = "pager"


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    root = context.home / ".qwen" / "extensions" / EXTENSION
    extension = {
        "name": EXTENSION,
        "version": context.version,
        "description": "Pager: join the local Pager broker from sessions started without "
        "`pager qwen` (MCP tools, and waiting mail added to the context on each prompt).",
        "mcpServers": {EXTENSION: context.mcp_server(manifest)},
    }
    hooks = command_hooks(
        {event: context.hook_command(manifest, event) for event in manifest.hooks.events}
    )
    files = (
        Planned(root / "qwen-extension.json", dump(extension)),
        Planned(root / "hooks" / "hooks.json", dump(hooks)),
    )
    return PluginPlan(
        location=root,
        files=files,
        next_steps=(
            "Restart Qwen Code; `qwen extensions list` shows `pager`.",
            "It is written under ~/.qwen: with QWEN_HOME set, move it to $QWEN_HOME/extensions.",
        ),
        uninstall_steps=("Restart Qwen Code afterwards.",),
    )
