"""OpenCode: one JavaScript plugin file, which OpenCode loads from its plugins directory.

    ~/.config/opencode/plugins/pager.js   ($XDG_CONFIG_HOME/opencode/plugins when that is set)

The plugin adds the MCP server `pager mcp` through OpenCode's `config` plugin hook (the user's
opencode.json is never edited) and, when a session goes idle, runs `pager hook` for it and adds
any waiting mail to the session with `noReply` (context, no turn). It does nothing in sessions
started with `pager opencode` (`PAGER_TOKEN` set), which the wrapper wires itself.
Unverified against a real OpenCode: see docs/skill-and-plugins.md.
"""

from __future__ import annotations

import json

from pager.implementations.manifest import Manifest
from pager.install.files import Planned
from pager.install.plugin import PluginContext, PluginPlan

EVENT = "session.idle"

TEMPLATE = """\
// Pager plugin for @NAME@, written by `pager plugin install @ID@` (Pager @VERSION@).
// `pager plugin install @ID@ --uninstall` removes it (a copy you changed is kept).
//
// In sessions started without `pager @ID@` it
//   1. adds the MCP server "pager" (the local command `pager mcp`) to the configuration,
//      unless the configuration already has a server of that name, and
//   2. when a session goes idle, runs `pager hook` for it and, if mail was waiting, adds the
//      mail to that session with noReply: no turn starts; the model sees it on the next one;
//   3. before a tool that writes files runs, asks `pager hook --pre-tool` whether another agent
//      holds one of its paths (edit reservations), and fails the call with the hook's reason
//      when it does; no answer within PRE_TOOL_TIMEOUT_MS, or any error: the call goes ahead.
// Sessions started with `pager @ID@` (PAGER_TOKEN is set) are wired by the wrapper: the
// plugin does nothing there. @VERIFIED@

import { spawn } from "node:child_process";

const PAGER = @PAGER@;
const MCP_ARGS = @MCP_ARGS@;
const HOOK_ARGS = @HOOK_ARGS@;
const PRE_TOOL = @PRE_TOOL@; // { args, event, tools } from the manifest's [hooks.pre_tool], or null
const PRE_TOOL_TIMEOUT_MS = 5_000;

async function refusal(tool, args, cwd) {
  // The pre-tool hook's reason to refuse this call, or null (allowed, or no answer: fail open).
  if (!PRE_TOOL || typeof tool !== "string" || !PRE_TOOL.tools.includes(tool)) return null;
  const payload = JSON.stringify({
    hook_event_name: PRE_TOOL.event,
    tool_name: tool,
    tool_input: args ?? {},
    cwd,
  });
  try {
    const out = await new Promise((resolve) => {
      let text = "";
      let child;
      try {
        child = spawn(PAGER[0], [...PAGER.slice(1), ...PRE_TOOL.args], {
          cwd,
          stdio: ["pipe", "pipe", "ignore"],
          timeout: PRE_TOOL_TIMEOUT_MS,
        });
      } catch {
        resolve("");
        return;
      }
      child.stdout.on("data", (chunk) => {
        text += chunk;
      });
      child.on("error", () => resolve(""));
      child.on("close", (code) => resolve(code === 0 ? text : ""));
      child.stdin.on("error", () => {}); // a hook that does not read it: never our crash
      child.stdin.end(payload);
    });
    if (!out.trim()) return null;
    const decided = JSON.parse(out).hookSpecificOutput ?? {};
    return decided.permissionDecision === "deny" ? String(decided.permissionDecisionReason) : null;
  } catch {
    return null;
  }
}

function waitingMail(sessionID, cwd) {
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn(PAGER[0], [...PAGER.slice(1), ...HOOK_ARGS], {
        cwd,
        stdio: ["pipe", "pipe", "ignore"],
      });
    } catch {
      resolve("");
      return;
    }
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.on("error", () => resolve(""));
    child.on("close", () => resolve(out.trim()));
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify({ session_id: sessionID, cwd, hook_event_name: "@EVENT@" }));
  });
}

export const PagerPlugin = async ({ client, directory }) => {
  if (process.env.PAGER_TOKEN) return {};
  return {
    config: async (config) => {
      config.mcp = config.mcp ?? {};
      if (!config.mcp.pager) {
        config.mcp.pager = { type: "local", command: [...PAGER, ...MCP_ARGS], enabled: true };
      }
    },
    "tool.execute.before": async (input, output) => {
      const reason = await refusal(input?.tool, output?.args, directory);
      if (reason) throw new Error(reason); // @NAME@ fails the call with this message
    },
    event: async ({ event }) => {
      if (event.type !== "@EVENT@") return;
      const sessionID = event.properties?.sessionID;
      if (!sessionID) return;
      const text = await waitingMail(sessionID, directory);
      if (!text) return;
      try {
        await client.session.prompt({
          path: { id: sessionID },
          body: { noReply: true, parts: [{ type: "text", text }] },
        });
      } catch {
        // `pager hook` acknowledged the mail once it printed it; it shows in `history`.
      }
    },
  };
};
"""


def plugin_files(manifest: Manifest, context: PluginContext) -> PluginPlan:
    return plugin_plan(
        manifest,
        context,
        config_dir="opencode",
        name="OpenCode",
        verified="Unverified against a real OpenCode: see docs/skill-and-plugins.md.",
    )


def plugin_plan(
    manifest: Manifest, context: PluginContext, *, config_dir: str, name: str, verified: str
) -> PluginPlan:
    """The plugin file for OpenCode or a fork of it that loads plugins the same way (Kilo CLI),
    from `$XDG_CONFIG_HOME/<config_dir>/plugins/`."""
    path = context.config_home / config_dir / "plugins" / "pager.js"
    hook = [
        "hook",
        "--implementation",
        manifest.id,
        "--format",
        "text",
        "--max-chars",
        str(manifest.hooks.max_chars),
        EVENT,
    ]
    pre_tool = manifest.hooks.pre_tool
    checked = None
    if pre_tool is not None:
        checked = {
            "args": [
                "hook",
                "--implementation",
                manifest.id,
                "--pre-tool",
                pre_tool.spec(),
                pre_tool.event,
            ],
            "event": pre_tool.event,
            "tools": sorted({*pre_tool.paths, *pre_tool.shell, *pre_tool.patches}),
        }
    values = {
        "@PRE_TOOL@": json.dumps(checked),
        "@VERSION@": context.version,
        "@NAME@": name,
        "@ID@": manifest.id,
        "@VERIFIED@": verified,
        "@PAGER@": json.dumps(list(context.pager)),
        "@MCP_ARGS@": json.dumps(["mcp", "--implementation", manifest.id]),
        "@HOOK_ARGS@": json.dumps(hook),
        "@EVENT@": EVENT,
    }
    text = TEMPLATE
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return PluginPlan(
        location=path,
        files=(Planned(path, text.encode()),),
        next_steps=(f"Restart {name}; it loads plugins from that directory at start.",),
        uninstall_steps=(f"Restart {name} afterwards.",),
        notes=(verified,),
    )
