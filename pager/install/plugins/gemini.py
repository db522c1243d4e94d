"""Gemini CLI: an extension directory, which Gemini CLI loads on its next start.

    ~/.gemini/extensions/pager/
      gemini-extension.json                        name, version, the stdio MCP server `pager mcp`
      hooks/hooks.json                             `pager hook` on the manifest's [hooks] events

Gemini CLI reads every directory under `~/.gemini/extensions/` that holds a
`gemini-extension.json` (named like the directory), and an extension's hooks from its
`hooks/hooks.json`. Sources: docs/skill-and-plugins.md.
"""

from __future__ import annotations

from pager.implementations.manifest import Manifest
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._json import command_hooks, dump

EXTENSION = "pager"


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    root = context.home / ".gemini" / "extensions" / EXTENSION
    extension = {
        "name": EXTENSION,
        "version": context.version,
        "description": "Pager: join the local Pager broker from sessions started without "
        "`pager gemini` (MCP tools, and waiting mail added to the context on each prompt).",
        "mcpServers": {EXTENSION: context.mcp_server(manifest)},
    }
    hooks = command_hooks(
        {event: context.hook_command(manifest, event) for event in manifest.hooks.events}
    )
    files = (
        Planned(root / "gemini-extension.json", dump(extension)),
        Planned(root / "hooks" / "hooks.json", dump(hooks)),
    )
    return PluginPlan(
        location=root,
        files=files,
        next_steps=(
            "Restart Gemini CLI; `gemini extensions list` shows `pager`.",
            "Its hooks run only where hooks are enabled in Gemini CLI's settings (Pager does"
            " not edit settings.json).",
        ),
        uninstall_steps=("Restart Gemini CLI afterwards.",),
    )
