// Pager's idle wake for GitHub Copilot CLI (docs/implementations/copilot.md), an extension in
// the per-launch plugin (`extensions/pager/extension.mjs`) of `pager copilot`.
//
// It never claims mail. While the session is idle it asks the broker, through the launch's
// relay, what waits (`GET /v1/me/inbox`, nothing claimed); when a message it has not knocked
// for waits, it sends the session a short `[pager]` prompt (`session.send`). That prompt goes
// through the plugin's userPromptSubmitted hook like any other: the hook claims the mail, adds
// it to the turn's context and acknowledges it, and does not count the prompt as typed (it
// starts with `[pager]`). Each message gets at most one knock, so mail the hook cannot take
// (another session claimed it) never makes the session loop.
//
// Copilot CLI 1.0.102 runs extensions only with its EXTENSIONS feature flag: the launch sets
// COPILOT_CLI_ENABLED_FEATURE_FLAGS for its own process (nothing is written to ~/.copilot).
import { joinSession } from "@github/copilot-sdk/extension";

const POLL_MS = 2_000; // how often an idle session asks what waits (one loopback request)
const FIRST_MS = 1_000; // the sessionStart hook delivers what waits at the start first
const REQUEST_MS = 10_000;
const KNOWN_MAX = 1_000; // message ids already knocked for, newest kept
const KNOCK =
  "[pager] Mail is waiting for you in Pager; it is shown with this prompt. Read it, act on it" +
  " as your instructions allow, reply with the pager `send` tool when a reply is due, then end" +
  " this turn.";

const base = process.env.PAGER_URL;
const token = process.env.PAGER_TOKEN;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const session = await joinSession({});
if (base && token) {
  let idle = true; // a session starts waiting for its first prompt
  session.on((event) => {
    if (event?.type === "session.idle") idle = true;
    else if (event?.type === "user.message" || event?.type === "assistant.turn_start") idle = false;
  });
  void watch(() => idle, () => { idle = false; });
}

async function waiting() {
  const response = await fetch(`${base}/v1/me/inbox?limit=20`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(REQUEST_MS),
  });
  if (!response.ok) return [];
  const answer = await response.json();
  return (answer?.messages ?? []).map((message) => String(message.id));
}

async function watch(isIdle, busy) {
  const knocked = new Set();
  await sleep(FIRST_MS);
  for (;;) {
    try {
      if (isIdle()) {
        const fresh = (await waiting()).filter((id) => !knocked.has(id));
        if (fresh.length > 0 && isIdle()) {
          for (const id of fresh) knocked.add(id);
          while (knocked.size > KNOWN_MAX) knocked.delete(knocked.values().next().value);
          busy();
          await session.send({ prompt: KNOCK });
        }
      }
    } catch {
      // The broker is away or restarting (the relay answers 503): ask again later.
    }
    await sleep(POLL_MS);
  }
}
