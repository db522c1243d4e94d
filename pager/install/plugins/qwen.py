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
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._extension import extension_plan


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    return extension_plan(
        manifest,
        context,
        home=context.home / ".qwen",
        manifest_name="qwen-extension.json",
        next_steps=(
            "Restart Qwen Code; `qwen extensions list` shows `pager`.",
            "It is written under ~/.qwen: with QWEN_HOME set, move it to $QWEN_HOME/extensions.",
        ),
        uninstall_steps=("Restart Qwen Code afterwards.",),
    )
