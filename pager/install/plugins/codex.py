"""Codex CLI: a local plugin marketplace holding the Pager plugin.

    ~/.codex/plugins/pager/                        the marketplace (`pager-local`)
      .agents/plugins/marketplace.json             lists the plugin, source ./plugins/pager
      plugins/pager/                               the plugin
        .codex-plugin/plugin.json                  its manifest (points at hooks and MCP)
        hooks/hooks.json                           `pager hook` on the manifest's [hooks] events
        .mcp.json                                  the stdio MCP server `pager mcp`

Codex adds a marketplace and installs plugins with its own commands (`codex plugin marketplace
add`, `codex plugin add`, which copy the plugin into Codex's cache and enable it in its
config.toml): `pager setup` runs them (and `--undo` runs `codex plugin remove` and `codex plugin
marketplace remove`); `pager plugin install codex` prints them. Codex asks the user to trust new
hooks once (`/hooks`): that is the user's review of what a hook runs, which Pager must not
record on the user's behalf, so it stays a printed step. The personal
marketplace `~/.agents/plugins/marketplace.json` is the user's file and is left alone.
Sources and what is unverified: docs/skill-and-plugins.md.
"""

from __future__ import annotations

from pager.implementations.manifest import Manifest
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._json import command_hooks, dump

MARKETPLACE = "pager-local"
PLUGIN = "pager"
DESCRIPTION = (
    "Pager: join the local Pager broker from sessions started without `pager codex` "
    "(MCP tools, and waiting mail added to the context on each prompt)."
)


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    root = context.home / ".codex" / "plugins" / PLUGIN
    plugin = root / "plugins" / PLUGIN
    marketplace = {
        "name": MARKETPLACE,
        "interface": {"displayName": "Pager (this machine)"},
        "plugins": [
            {
                "name": PLUGIN,
                "source": {"source": "local", "path": f"./plugins/{PLUGIN}"},
                "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
                "category": "Productivity",
            }
        ],
    }
    manifest_json = {
        "name": PLUGIN,
        "version": context.version,
        "description": DESCRIPTION,
        "hooks": "./hooks/hooks.json",
        "mcpServers": "./.mcp.json",
    }
    hooks = command_hooks(context.hook_commands(manifest))
    mcp = {"mcpServers": {PLUGIN: context.mcp_server(manifest)}}
    files = (
        Planned(root / ".agents" / "plugins" / "marketplace.json", dump(marketplace)),
        Planned(plugin / ".codex-plugin" / "plugin.json", dump(manifest_json)),
        Planned(plugin / "hooks" / "hooks.json", dump(hooks)),
        Planned(plugin / ".mcp.json", dump(mcp)),
    )
    return PluginPlan(
        location=root,
        files=files,
        next_steps=(
            "Register it with Codex (once; files alone do not enable a plugin):",
            f"  codex plugin marketplace add {context.tilde(root)}",
            f"  then install `{PLUGIN}` from the `{MARKETPLACE}` marketplace in /plugins",
            "Then trust its hooks once in Codex with /hooks (Codex skips untrusted hooks).",
            "(Pager leaves these to Codex: installing copies the plugin into Codex's own cache,"
            " and trusting a hook is your review of what it runs.)",
        ),
        uninstall_steps=(
            f"If you installed it in Codex, uninstall `{PLUGIN}` there too (/plugins) and remove"
            f" the `{MARKETPLACE}` marketplace (see `codex plugin marketplace --help`).",
        ),
        notes=("What of it is verified against a real Codex: docs/skill-and-plugins.md.",),
        register=(
            ("codex", "plugin", "marketplace", "add", str(root)),
            ("codex", "plugin", "add", f"{PLUGIN}@{MARKETPLACE}"),
        ),
        register_steps=(
            "Then trust its hooks once in Codex with /hooks (Codex skips untrusted hooks;"
            " trusting a hook is your review of what it runs, so Pager leaves it to you).",
        ),
        unregister=(
            ("codex", "plugin", "remove", f"{PLUGIN}@{MARKETPLACE}"),
            ("codex", "plugin", "marketplace", "remove", MARKETPLACE),
        ),
    )
