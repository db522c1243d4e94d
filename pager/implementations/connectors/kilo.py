"""Kilo CLI: the inline configuration `KILO_CONFIG_CONTENT` (docs/implementations/kilo.md).

Kilo CLI is a fork of OpenCode that kept OpenCode's configuration (`mcp`, `plugin`, `{env:…}`
substitution) and plugin API under its own names: the configuration arrives in
`KILO_CONFIG_CONTENT`, and the schema is Kilo's. So `{config_content}` is built exactly as
OpenCode's (`opencode.inline_config`): the broker's MCP endpoint as the remote server `pager`
with `Authorization: Bearer {env:PAGER_TOKEN}` and `oauth: false`, and Pager's OpenCode plugin
(`assets/opencode/pager.js`, copied as `pager-kilo.js` into the launch's private directory),
its headless copy for a wake run (`kilo run --session ID PROMPT`). A configuration already in
the user's `KILO_CONFIG_CONTENT` is kept: Pager's entries are added to it. Checked with Kilo
CLI 7.7.7 by scripts/verify_harnesses.py (scripts/verify_kilo.py).
"""

from __future__ import annotations

from pager.implementations.connectors import opencode
from pager.implementations.manifest import Manifest
from pager.launch.wrapper import LaunchContext

VARIABLE = "KILO_CONFIG_CONTENT"
PLUGIN_NAME = "pager-kilo.js"
SCHEMA = "https://app.kilo.ai/config.json"


def prepare(manifest: Manifest, context: LaunchContext) -> dict[str, str]:
    config = opencode.inline_config(
        manifest, context, variable=VARIABLE, plugin_name=PLUGIN_NAME, schema=SCHEMA
    )
    return {"config_content": config}
