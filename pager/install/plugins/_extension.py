"""An extension directory of the Gemini CLI layout (Gemini CLI, and Qwen Code, its fork):
`<home>/extensions/pager/` with `<manifest_name>` (name, version, the stdio MCP server `pager
mcp`) and `hooks/hooks.json` (`pager hook` for each of the manifest's events)."""

from __future__ import annotations

from pathlib import Path

from pager.implementations.manifest import Manifest
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._json import command_hooks, dump

EXTENSION = "pager"


def extension_plan(
    manifest: Manifest,
    context: PluginContext,
    *,
    home: Path,
    manifest_name: str,
    next_steps: tuple[str, ...],
    uninstall_steps: tuple[str, ...],
) -> PluginPlan:
    root = home / "extensions" / EXTENSION
    extension = {
        "name": EXTENSION,
        "version": context.version,
        "description": "Pager: join the local Pager broker from sessions started without "
        f"`pager {manifest.id}` (MCP tools, and waiting mail added to the context on each"
        " prompt).",
        "mcpServers": {EXTENSION: context.mcp_server(manifest)},
    }
    hooks = command_hooks(context.hook_commands(manifest))
    files = (
        Planned(root / manifest_name, dump(extension)),
        Planned(root / "hooks" / "hooks.json", dump(hooks)),
    )
    return PluginPlan(
        location=root, files=files, next_steps=next_steps, uninstall_steps=uninstall_steps
    )
