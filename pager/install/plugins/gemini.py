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
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._extension import extension_plan


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    return extension_plan(
        manifest,
        context,
        home=context.home / ".gemini",
        manifest_name="gemini-extension.json",
        next_steps=(
            "Restart Gemini CLI; `gemini extensions list` shows `pager`.",
            "Its hooks run only where hooks are enabled in Gemini CLI's settings (Pager does"
            " not edit settings.json).",
        ),
        uninstall_steps=("Restart Gemini CLI afterwards.",),
    )
