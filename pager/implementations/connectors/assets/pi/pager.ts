// Pager extension for Pi, loaded for one launch by `pager pi` (`pi -e PATH`), which puts the
// session's PAGER_URL and PAGER_TOKEN in Pi's environment. Outside such a launch (no
// PAGER_TOKEN) it does nothing.
//
// Pi has no MCP client, so this extension
//   - registers Pager's tools (`pager_send`, `pager_fetch`, `pager_ack`, …): it lists them from
//     the broker's MCP endpoint and forwards each call there over HTTP with the session token;
//   - delivers mail: it long-polls the MCP tool `fetch` and hands what arrives to the session
//     with pi.sendMessage(…, { deliverAs: "followUp", triggerTurn: true }), which starts a turn
//     when the agent is idle (and queues after the current one otherwise), then acknowledges it;
//   - reports the prompts a person types, for the loop guard (SPEC §8.1): on Pi's `input` event
//     (a prompt typed interactively or sent by an RPC driver; its own sendMessage delivery does
//     not pass there) with text that does not start with Pager's "[pager]" and a source other
//     than "extension", it POSTs /v1/sessions/current/prompted, so the session's next send starts
//     a new chain. It waits at most REPORT_WAIT_MS for the broker, always lets the input go on
//     and never throws. Checked in a real Pi (0.73.1) by scripts/verify_harnesses.py (an RPC
//     prompt is reported; the sendMessage delivery is not), the other cases against the fake
//     host of tests/fakes/fake_harness_generic.py.
//
// Without a UI (`pi -p`, `--mode json`: `ctx.hasUI` is false; e.g. a wake run, the headless
// `pi -p --session ID PROMPT` the broker starts when mail waits, docs/wake.md) Pi exits once
// its prompt is processed and drops a follow-up that comes later, so mail pushed by the long
// poll would be acknowledged and lost. There it polls nothing: on `before_agent_start` it claims
// the waiting mail and returns it as a custom "pager" message, which Pi stores in the session
// and sends with the prompt, and acknowledges it once the agent starts.
//
// It refuses an edit of a file another agent reserved (docs/reservations.md): on Pi's
// `tool_call` event (before a tool runs) for a tool that writes files, it runs the launch's
// `pager hook --pre-tool` (PRE_TOOL below, written by the connector from the manifest's
// `[hooks.pre_tool]`) with the call and returns `{ block: true, reason }` when the hook denies;
// the model reads the reason. It fails open (no answer within PRE_TOOL_TIMEOUT_MS, or any error:
// the call goes ahead).
//
// Checked in a real Pi (0.73.1) by scripts/verify_harnesses.py: the tools are registered and
// offered to the model, mail wakes an idle session, and a headless run gets the waiting mail
// in its first model request; see docs/implementations/pi.md. Written without type annotations
// or imports, so it is plain JavaScript as well as TypeScript.

const PREFIX = "pager_";
const POLL_WAIT_S = 25; // the broker's long-poll bound is 60 s
const RETRY_MAX_MS = 30_000;
const REPORT_WAIT_MS = 2_000; // how long a typed prompt waits for its report to reach the broker
const REPORT_TIMEOUT_MS = 15_000; // then the report goes on in the background until this bound
// How Pager's own wake text begins (the envelope's preamble), as `pager hook` tells it apart.
const PAGER_PREFIX = "[pager]";
const PRE_TOOL = null; // the connector writes { command, event, tools } for a launch
const PRE_TOOL_TIMEOUT_MS = 5_000;

export default function pagerExtension(pi) {
  const base = process.env.PAGER_URL;
  const token = process.env.PAGER_TOKEN;
  if (!base || !token) return;

  let requestId = 0;
  let poller = null;
  let claimed = []; // a headless run's claims, acknowledged once the agent has started

  async function rpc(method, params, signal) {
    const response = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${token}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++requestId, method, params }),
      signal,
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`Pager answered HTTP ${response.status}: ${text.slice(0, 200)}`);
    const message = parseRpc(text, response.headers.get("content-type") ?? "");
    if (message.error) throw new Error(message.error.message ?? "MCP error");
    return message.result ?? {};
  }

  const callTool = (name, args, signal) => rpc("tools/call", { name, arguments: args }, signal);

  async function registerTools() {
    const listed = await rpc("tools/list", {});
    for (const tool of listed.tools ?? []) {
      pi.registerTool({
        name: PREFIX + tool.name,
        label: `Pager ${tool.name}`,
        description: `${tool.description ?? ""} (Pager: messages between coding-agent sessions)`,
        parameters: tool.inputSchema ?? { type: "object", properties: {} },
        async execute(_toolCallId, params, signal) {
          const result = await callTool(tool.name, params ?? {}, signal);
          const text = textOf(result);
          if (result.isError) throw new Error(text);
          return { content: [{ type: "text", text }], details: result.structuredContent ?? {} };
        },
      });
    }
  }

  async function poll(signal) {
    let delay = 1000;
    while (!signal.aborted) {
      try {
        const result = await callTool("fetch", { limit: 10, wait_s: POLL_WAIT_S }, signal);
        if (result.isError) {
          if (isFinal(result)) return; // the session was ended or its token is no longer valid
          throw new Error("fetch refused");
        }
        const claims = result.structuredContent?.claims ?? [];
        if (claims.length > 0) {
          pi.sendMessage(
            {
              customType: "pager",
              content: mailText(result, claims),
              display: true,
              details: { messages: claims.map((claim) => claim.message?.id) },
            },
            { deliverAs: "followUp", triggerTurn: true },
          );
          await callTool("ack", { tokens: claims.map((claim) => claim.token) }, signal);
        }
        delay = 1000;
      } catch {
        if (signal.aborted) return;
        await sleep(delay);
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    }
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

  const tools = registerTools().catch(() => {
    // The broker did not answer: the session runs without Pager's tools.
  });

  pi.on("session_start", async (_event, ctx) => {
    await tools;
    if (poller || ctx?.hasUI === false) return; // without a UI: before_agent_start delivers
    const controller = new AbortController();
    poller = controller;
    poll(controller.signal);
  });

  pi.on("before_agent_start", async (_event, ctx) => {
    if (ctx?.hasUI !== false) return undefined; // with a UI the long poll delivers
    try {
      await tools;
      const result = await callTool("fetch", { limit: 10, wait_s: 0 });
      const claims = result.isError ? [] : (result.structuredContent?.claims ?? []);
      if (claims.length === 0) return undefined;
      claimed.push(...claims.map((claim) => claim.token));
      return {
        message: {
          customType: "pager",
          content: mailText(result, claims),
          display: true,
          details: { messages: claims.map((claim) => claim.message?.id) },
        },
      };
    } catch {
      return undefined; // the broker did not answer: the prompt goes on without the mail
    }
  });

  pi.on("agent_start", async () => {
    if (claimed.length === 0) return;
    const tokens = claimed;
    claimed = [];
    try {
      await callTool("ack", { tokens });
    } catch {
      // unacknowledged, the claims expire and the mail is delivered again
    }
  });

  pi.on("input", async (event) => {
    try {
      const text = typeof event?.text === "string" ? event.text.trim() : "";
      if (event?.source !== "extension" && text && !text.startsWith(PAGER_PREFIX)) {
        await reportPrompt();
      }
    } catch {
      // Never in the person's way: unreported, the chain just does not start again.
    }
    return { action: "continue" };
  });

  pi.on("tool_call", async (event, ctx) => {
    const reason = await refusal(event?.toolName, event?.input, ctx?.cwd);
    return reason ? { block: true, reason } : undefined;
  });

  pi.on("session_shutdown", async () => {
    poller?.abort();
    poller = null;
  });
}

async function refusal(tool, args, directory) {
  // The pre-tool hook's reason to refuse this call, or null (allowed, or no answer: fail open).
  if (!PRE_TOOL || typeof tool !== "string" || !PRE_TOOL.tools.includes(tool)) return null;
  const payload = JSON.stringify({
    hook_event_name: PRE_TOOL.event,
    tool_name: tool,
    tool_input: args ?? {},
    cwd: typeof directory === "string" ? directory : process.cwd(),
  });
  try {
    const { execFile } = await import("node:child_process");
    const stdout = await new Promise((resolve) => {
      const child = execFile(
        "/bin/sh",
        ["-c", PRE_TOOL.command],
        { timeout: PRE_TOOL_TIMEOUT_MS },
        (error, out) => resolve(error ? "" : String(out)),
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

function textOf(result) {
  return (result.content ?? [])
    .filter((item) => item.type === "text")
    .map((item) => item.text)
    .join("\n");
}

function mailText(result, claims) {
  // The rendered fetch result is the broker's envelope text; drop its header and the claim
  // tokens (this extension acknowledges the messages itself).
  const tokens = new Set(claims.map((claim) => `token: ${claim.token}`));
  const rendered = textOf(result)
    .split("\n")
    .slice(1)
    .filter((line) => !tokens.has(line))
    .join("\n");
  return (
    `Pager delivered ${claims.length} message(s) from other agents (already acknowledged; ` +
    `answer with ${PREFIX}send if a reply is needed).\n` +
    rendered
  );
}

function isFinal(result) {
  try {
    const error = JSON.parse(textOf(result) || "{}");
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
