"""Claude Code: a local plugin marketplace holding the Pager plugin.

    ~/.claude/plugins/pager/                       the marketplace (`pager-local`)
      .claude-plugin/marketplace.json              lists the one plugin, source ./plugins/pager
      plugins/pager/                               the plugin
        .claude-plugin/plugin.json                 its manifest
        hooks/hooks.json                           `pager hook` on the manifest's [hooks] events
        .mcp.json                                  the stdio MCP server `pager mcp`

Files alone do not enable a plugin: Claude Code registers a marketplace and installs plugins
from it with its own commands (which edit its settings, which Pager never touches), so those are
printed as the next steps. `pager setup` instead adds the two settings keys Claude Code reads for
this (`extraKnownMarketplaces`, `enabledPlugins` in `~/.claude/settings.json`), recorded so that
`pager setup --undo` takes exactly them back. Sources: docs/skill-and-plugins.md.
"""

from __future__ import annotations

from pager.implementations.manifest import Manifest
from pager.install.entries import Entry
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._json import command_hooks, dump

MARKETPLACE = "pager-local"
PLUGIN = "pager"
DESCRIPTION = (
    "Pager: join the local Pager broker from sessions started without `pager claude` "
    "(MCP tools, and waiting mail added to the context on each prompt)."
)


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    root = context.home / ".claude" / "plugins" / PLUGIN
    plugin = root / "plugins" / PLUGIN
    marketplace = {
        "name": MARKETPLACE,
        "owner": {"name": "Pager (written by `pager plugin install claude`)"},
        "metadata": {"description": "Pager's plugin, from this machine's Pager installation."},
        "plugins": [
            {
                "name": PLUGIN,
                "source": f"./plugins/{PLUGIN}",
                "description": DESCRIPTION,
                "version": context.version,
            }
        ],
    }
    manifest_json = {"name": PLUGIN, "version": context.version, "description": DESCRIPTION}
    hooks = command_hooks(context.hook_commands(manifest))
    mcp = {"mcpServers": {PLUGIN: context.mcp_server(manifest)}}
    files = (
        Planned(root / ".claude-plugin" / "marketplace.json", dump(marketplace)),
        Planned(plugin / ".claude-plugin" / "plugin.json", dump(manifest_json)),
        Planned(plugin / "hooks" / "hooks.json", dump(hooks)),
        Planned(plugin / ".mcp.json", dump(mcp)),
    )
    shown_root, shown_plugin = context.tilde(root), context.tilde(plugin)
    settings = context.home / ".claude" / "settings.json"
    entries = (
        Entry(
            settings,
            ("extraKnownMarketplaces", MARKETPLACE),
            {"source": {"source": "directory", "path": str(root)}},
        ),
        Entry(settings, ("enabledPlugins", f"{PLUGIN}@{MARKETPLACE}"), True),
    )
    return PluginPlan(
        location=root,
        files=files,
        next_steps=(
            "Register it with Claude Code (once; files alone do not enable a plugin):",
            f"  claude plugin marketplace add {shown_root}",
            f"  claude plugin install {PLUGIN}@{MARKETPLACE}",
            f"Or load it for one session only: claude --plugin-dir {shown_plugin}",
            "When this command reports updated files later, refresh Claude Code's copy:",
            f"  claude plugin marketplace update {MARKETPLACE}",
            f"  claude plugin update {PLUGIN}@{MARKETPLACE}",
        ),
        entries=entries,
        entries_steps=(
            f"Claude Code registers the {MARKETPLACE} marketplace and enables {PLUGIN}@"
            f"{MARKETPLACE} from {context.tilde(settings)} at its next start.",
        ),
        uninstall_steps=(
            "If you registered it with Claude Code, remove it there too:",
            f"  claude plugin uninstall {PLUGIN}@{MARKETPLACE}",
            f"  claude plugin marketplace remove {MARKETPLACE}",
        ),
    )
