"""Argument and environment templates of a manifest: `{placeholder}` from a fixed set.

A template is a string in which `{name}` stands for a value the wrapper knows at launch (the
broker URL, the session token, …) and `{{` / `}}` stand for literal braces. Only the names in
`PLACEHOLDERS` exist; anything else in braces is an error when the manifest is read, not when
a harness is launched.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from types import MappingProxyType

#: Every placeholder a template may use, with what the wrapper puts there.
PLACEHOLDERS: Mapping[str, str] = MappingProxyType(
    {
        "url": "the launch relay's base URL (it forwards to the broker), e.g. http://127.0.0.1:41877",
        "mcp_url": "the MCP endpoint through the launch relay, {url}/mcp",
        "token": "the relay's bearer credential (secret: prefer passing it through env)",
        "token_file": "the private file holding the session's current token (PAGER_TOKEN_FILE)",
        "agent_id": "the Pager agent id of the session (agt_…)",
        "address": "the agent's address, alias@workspace-slug (the agent id when it has no alias)",
        "alias": "the session name given with --session-name (empty when none)",
        "session_id": "the Pager session (attachment) id",
        "state_dir": "Pager's state directory",
        "conversation_key": "the harness's conversation id when known (empty when not)",
        "mcp_config_file": "a private (0600) file with the harness's MCP configuration, "
        "written by the connector",
        "settings_file": "a private (0600) settings file for the harness (hooks, MCP, …), "
        "written by the connector",
        "config_dir": "a private (0700) directory the connector fills with the harness's "
        "per-launch configuration (e.g. the home Gemini CLI is given as GEMINI_CLI_HOME)",
        "config_content": "inline configuration text built by the connector "
        "(e.g. OpenCode's JSON for OPENCODE_CONFIG_CONTENT)",
        "extension_path": "the path of the extension or plugin Pager ships for this "
        "harness, for harnesses that load one per launch (e.g. pi -e PATH)",
        "free_port": "a TCP port of 127.0.0.1 that was free when the launch started, for a "
        "server of the harness's own that must be this launch's alone (e.g. Cline's hub)",
        "hook_command": "the command line the harness runs for Pager's hooks",
        "python": "the absolute path of the Python interpreter that runs Pager",
        "prompt": "the prompt a wake run starts with: mail waits and how to read it "
        "(only in `[wake.launch]` and `[wake.input] line`, docs/wake.md)",
        "input_file": "a private (0600) file an interactive session reads prompts from, to "
        "which the launch appends `[wake.input] line` when mail waits (only in `[wake.input]`)",
    }
)

#: The whole value of `executable` may be this: the program is the user's first argument.
EXECUTABLE_FROM_ARGS = "{argv0}"

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


class TemplateError(ValueError):
    """A template is malformed, names an unknown placeholder, or lacks a value at render."""


def _known() -> str:
    return ", ".join(f"{{{name}}}" for name in sorted(PLACEHOLDERS))


def placeholders(template: str) -> tuple[str, ...]:
    """The placeholder names a template uses, in order; `TemplateError` when malformed."""
    names: list[str] = []
    for match in _TOKEN.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if token in ("{", "}"):
            raise TemplateError(
                f"unbalanced {token!r} at position {match.start()}; "
                "write {{ or }} for a literal brace"
            )
        name = match.group(1)
        if name not in PLACEHOLDERS:
            close = difflib.get_close_matches(name, PLACEHOLDERS, n=1)
            hint = f" (did you mean {{{close[0]}}}?)" if close else ""
            raise TemplateError(f"unknown placeholder {{{name}}}{hint}; known: {_known()}")
        names.append(name)
    return tuple(names)


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill a template; every placeholder it uses must have a value."""
    placeholders(template)  # malformed or unknown: refuse before producing anything

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        try:
            return values[name]
        except KeyError:
            raise TemplateError(f"no value for placeholder {{{name}}}") from None

    return _TOKEN.sub(substitute, template)
