// Pager plugin for OpenCode (1.x plugin API), loaded for one launch by `pager opencode`, which
// names this file in OPENCODE_CONFIG_CONTENT ("plugin": ["file://…/pager.js"]) and puts the
// session's PAGER_URL and PAGER_TOKEN in OpenCode's environment. Outside such a launch
// (no PAGER_TOKEN) it does nothing.
//
// It delivers mail: while OpenCode has a session, it long-polls the broker's MCP tool `fetch`
// and, when messages arrive, adds them to that session with client.session.prompt — without
// `noReply` when the session is idle (this starts a turn: an idle session wakes up), with
// `noReply: true` while it is busy (the model sees the mail at its next step) — and then
// acknowledges them. The MCP tools themselves come from the "pager" remote MCP server of the
// same configuration. Checked in a real OpenCode (1.18.33) by scripts/verify_harnesses.py (the
// idle wake; the busy path is not): see docs/implementations/opencode.md.
//
// It reports the prompts the person types, for the loop guard (SPEC §8.1): OpenCode calls
// `chat.message` for every new user message, this plugin's own deliveries included, so for one in
// the root session whose text (without the parts OpenCode adds itself) is neither such a delivery
// (DELIVERY_PREFIX) nor Pager's wake text ("[pager]…"), it POSTs /v1/sessions/current/prompted,
// and the session's next send starts a new chain. It waits at most REPORT_WAIT_MS for the broker
// and never fails the prompt. Checked in a real OpenCode (1.18.33) by scripts/verify_harnesses.py
// (a prompt sent over the TUI's HTTP API is reported; the plugin's own delivery is not), the
// other cases against the fake host of tests/fakes/fake_harness_generic.py.
//
// In a wake run (a headless `opencode run --session ID PROMPT` the broker starts when mail
// waits, docs/wake.md) the connector writes `HEADLESS = true` below. Nobody is at the terminal
// and `opencode run` exits when its turn ends, so mail pushed by the long poll would be
// acknowledged but reach the model only after the run (or never): instead, the plugin claims
// the waiting mail in `chat.message` and adds it to the run's prompt before OpenCode sends it,
// acknowledges it, and polls nothing; it reports no prompt as typed (no person typed it).
// Checked in a real OpenCode (1.18.33) by scripts/verify_harnesses.py.
//
// It refuses an edit of a file another agent reserved (docs/reservations.md): before a tool
// that writes files runs (`tool.execute.before`), it runs the launch's `pager hook --pre-tool`
// (PRE_TOOL below, written by the connector from the manifest's `[hooks.pre_tool]`) with the
// call, and throws its reason when the hook denies: OpenCode then fails the call with that
// message, which the model reads. Only the tools the manifest names start the hook; it fails
// open (no answer within PRE_TOOL_TIMEOUT_MS, or any error: the call goes ahead).
//
// Only one export: OpenCode 1.x calls every exported function of a plugin module.

import { execFile } from "node:child_process";

const HEADLESS = false; // the connector writes `true` for a wake run (see above)
const PRE_TOOL = null; // the connector writes { command, event, tools } for a launch
const PRE_TOOL_TIMEOUT_MS = 5_000;
const POLL_WAIT_S = 25; // the broker's long-poll bound is 60 s
const RETRY_MAX_MS = 30_000;
const PROMPT_GRACE_MS = 3_000; // how long a blocking prompt() may take to fail before we ack
const REPORT_WAIT_MS = 2_000; // how long a typed prompt waits for its report to reach the broker
const REPORT_TIMEOUT_MS = 15_000; // then the report goes on in the background until this bound
// How this plugin's own mail prompts begin: OpenCode calls `chat.message` for them too, and they
// are not typed by the person.
const DELIVERY_PREFIX = "Pager delivered ";
// How Pager's own wake text begins (the envelope's preamble), as `pager hook` tells it apart.
const PAGER_PREFIX = "[pager]";

export const PagerPlugin = async ({ client, directory }) => {
  const base = process.env.PAGER_URL;
  const token = process.env.PAGER_TOKEN;
  if (!base || !token || !client?.session) return {};

  const state = { session: null, busy: false, children: new Set(), stopped: false };
  let nudge = () => {};
  let requestId = 0;

  async function callTool(name, args) {
    const response = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${token}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: ++requestId,
        method: "tools/call",
        params: { name, arguments: args },
      }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`Pager answered HTTP ${response.status}`);
    const message = parseRpc(text, response.headers.get("content-type") ?? "");
    if (message.error) throw new Error(message.error.message ?? "MCP error");
    return message.result ?? {};
  }

  async function deliver(result) {
    const claims = result.structuredContent?.claims ?? [];
    if (claims.length === 0) return;
    const text = mailText(result, claims);
    const body = { parts: [{ type: "text", text }] };
    if (state.busy) body.noReply = true;
    const args = { path: { id: state.session }, body };
    if (typeof client.session.promptAsync === "function") {
      await client.session.promptAsync(args);
    } else {
      // prompt() answers when the turn it starts has finished: wait only long enough to see
      // it refused, so the acknowledgement is not held for a whole turn.
      const sent = client.session.prompt(args);
      sent.catch(() => {});
      await Promise.race([sent, sleep(PROMPT_GRACE_MS)]);
    }
    await callTool("ack", { tokens: claims.map((claim) => claim.token) });
  }

  async function loop() {
    let delay = 1000;
    while (!state.stopped) {
      if (!state.session) {
        await new Promise((resolve) => {
          nudge = resolve;
        });
        continue;
      }
      try {
        const result = await callTool("fetch", { limit: 10, wait_s: POLL_WAIT_S });
        if (result.isError) {
          if (isFinal(result)) return; // the session was ended or its token is no longer valid
          throw new Error("fetch refused");
        }
        if (state.session) await deliver(result);
        delay = 1000;
      } catch {
        await sleep(delay);
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    }
  }

  if (!HEADLESS) loop();

  async function addWaitingMail(parts) {
    // A wake run: the waiting mail goes into the run's own prompt (its last text part), so
    // the model reads it in the run's first request; then it is acknowledged.
    const text = (Array.isArray(parts) ? parts : []).findLast(
      (part) => part?.type === "text" && !part.synthetic && typeof part.text === "string",
    );
    if (!text) return;
    const result = await callTool("fetch", { limit: 10, wait_s: 0 });
    const claims = result.isError ? [] : (result.structuredContent?.claims ?? []);
    if (claims.length === 0) return;
    text.text = `${text.text}\n\n${mailText(result, claims)}`;
    await callTool("ack", { tokens: claims.map((claim) => claim.token) });
  }

  async function reportPrompt() {
    // The person typed a prompt: the session's next send starts a new chain (SPEC §8.1).
    const reported = fetch(`${base}/v1/sessions/current/prompted`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: "{}",
      signal: AbortSignal.timeout(REPORT_TIMEOUT_MS),
    })
      .then((response) => response.text())
      .catch(() => {}); // fail open: unreported, the chain just does not start again
    await within(reported, REPORT_WAIT_MS);
  }

  const isRoot = (id) => Boolean(id) && !state.children.has(id);
  const select = (id) => {
    state.session = id;
    nudge();
  };

  return {
    "tool.execute.before": async (input, output) => {
      const reason = await refusal(input?.tool, output?.args, directory);
      if (reason) throw new Error(reason); // OpenCode fails the call with this message
    },
    event: async ({ event }) => {
      const props = event?.properties ?? {};
      switch (event?.type) {
        case "session.created":
        case "session.updated": {
          const info = props.info ?? {};
          if (info.parentID) state.children.add(info.id);
          else if (info.id && (event.type === "session.created" || !state.session)) select(info.id);
          break;
        }
        case "session.status":
          if (isRoot(props.sessionID)) {
            if (props.sessionID !== state.session) select(props.sessionID);
            state.busy = props.status?.type !== "idle";
          }
          break;
        case "session.idle":
          if (isRoot(props.sessionID)) {
            if (props.sessionID !== state.session) select(props.sessionID);
            state.busy = false;
          }
          break;
        case "session.deleted":
          if (props.info?.id === state.session) state.session = null;
          break;
        default:
          break;
      }
    },
    "chat.message": async (input, output) => {
      try {
        if (!isRoot(input?.sessionID)) return; // a child session's prompt comes from its agent
        if (HEADLESS) return await addWaitingMail(output?.parts);
        if (typedByPerson(promptText(output?.parts))) await reportPrompt();
      } catch {
        // Never in the person's way: unreported, the chain just does not start again (a wake
        // run's mail stays claimed until its claim expires, then waits again).
      }
    },
  };
};

async function refusal(tool, args, directory) {
  // The pre-tool hook's reason to refuse this call, or null (allowed, or no answer: fail open).
  if (!PRE_TOOL || typeof tool !== "string" || !PRE_TOOL.tools.includes(tool)) return null;
  const payload = JSON.stringify({
    hook_event_name: PRE_TOOL.event,
    tool_name: tool,
    tool_input: args ?? {},
    cwd: directory ?? process.cwd(),
  });
  try {
    const stdout = await new Promise((resolve) => {
      const child = execFile(
        "/bin/sh",
        ["-c", PRE_TOOL.command],
        { timeout: PRE_TOOL_TIMEOUT_MS },
        (error, out) => resolve(error ? "" : out),
      );
      child.stdin?.on("error", () => {}); // a hook that does not read it: never our crash
      child.stdin?.end(payload);
    });
    if (!stdout.trim()) return null;
    const decided = JSON.parse(stdout).hookSpecificOutput ?? {};
    return decided.permissionDecision === "deny" ? String(decided.permissionDecisionReason) : null;
  } catch {
    return null;
  }
}

function parseRpc(text, contentType) {
  if (contentType.includes("text/event-stream")) {
    const data = text
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trim());
    return JSON.parse(data[data.length - 1] ?? "{}");
  }
  return JSON.parse(text);
}

function mailText(result, claims) {
  // The rendered fetch result is the broker's envelope text; drop its header and the claim
  // tokens (this plugin acknowledges the messages itself).
  const tokens = new Set(claims.map((claim) => `token: ${claim.token}`));
  const rendered = (result.content ?? [])
    .filter((item) => item.type === "text")
    .map((item) => item.text)
    .join("\n")
    .split("\n")
    .slice(1)
    .filter((line) => !tokens.has(line))
    .join("\n");
  return (
    `${DELIVERY_PREFIX}${claims.length} message(s) from other agents (already acknowledged; ` +
    "answer with the pager MCP tool `send` if a reply is needed).\n" +
    rendered
  );
}

function promptText(parts) {
  // The message's text, without the parts OpenCode adds itself (`synthetic`: e.g. files read).
  return (Array.isArray(parts) ? parts : [])
    .filter((part) => part?.type === "text" && !part.synthetic && typeof part.text === "string")
    .map((part) => part.text)
    .join("\n")
    .trim();
}

function typedByPerson(text) {
  // `opencode run` quotes each message argument that holds a space ("[pager] …"): one
  // leading quote is not the person's.
  const bare = text.replace(/^"/, "");
  return Boolean(text) && !bare.startsWith(DELIVERY_PREFIX) && !bare.startsWith(PAGER_PREFIX);
}

function isFinal(result) {
  try {
    const error = JSON.parse(result.content?.[0]?.text ?? "{}");
    return error.code === "ended" || error.code === "unauthenticated";
  } catch {
    return false;
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function within(promise, ms) {
  // `promise`, or nothing after `ms` (it goes on in the background).
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
