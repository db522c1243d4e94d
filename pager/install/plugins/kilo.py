"""Kilo CLI: OpenCode's plugin file, in Kilo's plugins directory (Kilo CLI is an OpenCode fork
that loads plugins the same way).

    ~/.config/kilo/plugins/pager.js   ($XDG_CONFIG_HOME/kilo/plugins when that is set)

In sessions started without `pager kilo` the plugin adds the MCP server `pager mcp` through the
`config` plugin hook (the user's kilo.json is never edited) and, when a session goes idle, runs
`pager hook` for it and adds any waiting mail with `noReply`. It does nothing in sessions
started with `pager kilo` (`PAGER_TOKEN` set), which the wrapper wires itself.
"""

from __future__ import annotations

from pager.implementations.manifest import Manifest
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins import opencode

VERIFIED = "Kilo CLI 7.7.7 loaded it from that directory: docs/implementations/kilo.md."


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    return opencode.plugin_plan(
        manifest, context, config_dir="kilo", name="Kilo CLI", verified=VERIFIED
    )
