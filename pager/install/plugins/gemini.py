"""Gemini CLI: an extension directory, which Gemini CLI loads on its next start.

    ~/.gemini/extensions/pager/
      gemini-extension.json                        name, version, the stdio MCP server `pager mcp`
      hooks/hooks.json                             `pager hook` on the manifest's [hooks] events

Gemini CLI reads every directory under `~/.gemini/extensions/` that holds a
`gemini-extension.json` (named like the directory), and an extension's hooks from its
`hooks/hooks.json`. Those hooks run only where hooks are enabled in its settings
(`hooksConfig.enabled` in `~/.gemini/settings.json`): `pager setup` adds that entry (and takes it
back on `--undo`); `pager plugin install gemini` prints it as a step. Sources:
docs/skill-and-plugins.md.
"""

from __future__ import annotations

import dataclasses

from pager.implementations.manifest import Manifest
from pager.install.entries import Entry
from pager.install.plugin import PluginContext, PluginPlan
from pager.install.plugins._extension import extension_plan

#: The settings key that turns on hooks (extension hooks included) in Gemini CLI.
HOOKS_ENABLED = ("hooksConfig", "enabled")


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    settings = context.home / ".gemini" / "settings.json"
    label = ".".join(HOOKS_ENABLED)
    plan = extension_plan(
        manifest,
        context,
        home=context.home / ".gemini",
        manifest_name="gemini-extension.json",
        next_steps=(
            "Restart Gemini CLI; `gemini extensions list` shows `pager`.",
            f"Its hooks run only where hooks are enabled: set {label} to true in"
            f" {context.tilde(settings)} (pager setup does it for you).",
        ),
        uninstall_steps=("Restart Gemini CLI afterwards.",),
    )
    return dataclasses.replace(
        plan,
        entries=(Entry(settings, HOOKS_ENABLED, True),),
        entries_steps=(
            f"Gemini CLI loads the extension, with its hooks ({label} in"
            f" {context.tilde(settings)}), at its next start: restart it.",
        ),
    )
