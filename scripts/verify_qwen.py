"""Qwen Code's checks for scripts/verify_harnesses.py (`--only qwen`).

Qwen Code runs with a throwaway `HOME` whose `~/.qwen/settings.json` selects OpenAI-compatible
auth, and `OPENAI_API_KEY` (dummy), `OPENAI_BASE_URL` (the recorder) and `OPENAI_MODEL`, so
its model requests reach the script's recorder and are refused. See
docs/implementations/qwen.md ("Verified against the real harness").
"""

from __future__ import annotations

import contextlib
import json
import re

import attrs
from verify_harnesses import (
    MAIL_BOUND,
    UNCHECKED,
    Check,
    Context,
    Launch,
    Process,
    Rejected,
    Unchecked,
    WakeSetup,
    _cause_after_delivery,
    _tail,
    check_wake,
    run,
)

MODEL = "pager-verify-model"


def _qwen_home(ctx: Context) -> None:
    """A user who chose OpenAI-compatible auth at the recorder and sends no statistics."""
    own = ctx.home / ".qwen"
    own.mkdir(exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": MODEL},
        "privacy": {"usageStatisticsEnabled": False},
    }
    (own / "settings.json").write_text(json.dumps(settings))
    ctx.env.update(
        OPENAI_API_KEY="pager-verify-dummy-key",
        OPENAI_BASE_URL=f"{ctx.model.url}/v1",
        OPENAI_MODEL=MODEL,
        QWEN_CODE_NO_RELAUNCH="1",
    )


def check_qwen(ctx: Context) -> list[Check]:
    _qwen_home(ctx)
    checks = []
    # `qwen mcp list` refuses the --session-id the wrapper puts first for a new conversation
    # (the manifest's other_subcommands leave it out there; this check names none).
    no_choice = attrs.evolve(ctx.spec, choose_flag=None)
    with ctx.launch(["mcp", "list"], spec=no_choice) as launch:

        def mcp_list() -> str:
            status, out = run(launch, None, ctx.workspace, 90)
            line = next((x for x in out.splitlines() if re.search(r"\bpager\b.*: ", x)), None)
            if status != 0 or line is None or "Connected" not in line or "Disconnected" in line:
                raise Rejected(f"exit {status}: {_tail(out)}")
            return f"`qwen mcp list`: {line.strip()}"

        checks.append(ctx.check("MCP server from the per-launch extension", launch, mcp_list))

    with ctx.launch(["-p", "ping"]) as launch:
        body = "verify: qwen hooks"
        message = ctx.broker.send(ctx.workspace, launch.address, body)
        out: dict[str, str] = {}

        def headless() -> str:
            status, text = run(launch, None, ctx.workspace, 120)
            out["text"] = text
            (ctx.workspace / "qwen-output.log").write_text(launch.redact(text))  # for --keep
            path, _ = ctx.model.wait_for(body, 10)
            state = ctx.broker.wait_state(ctx.workspace, message, 10)
            if state != "acknowledged":
                raise Rejected(f"the model request (POST {path}) carried the mail; it is {state}")
            return (
                f"`qwen {' '.join(launch.plan.args)}` (exit {status}): mail sent before the"
                f" launch was in the model request (POST {path}), added by"
                f" {_delivered_by(ctx, body)} of the per-launch extension; acknowledged"
            )

        checks.append(ctx.check("mail through the hooks, into the model request", launch, headless))

        def state() -> str:
            own = ctx.home / ".qwen"
            chats = sorted(
                str(path.relative_to(own)) for path in (own / "projects").glob("*/chats/*.jsonl")
            )
            settings = json.loads((own / "settings.json").read_text())
            if not chats:
                raise Rejected("no session of the launch reached the user's ~/.qwen/projects")
            if "mcpServers" in settings or "hooks" in settings:
                raise Rejected(f"the user's settings.json changed: {settings}")
            if (own / "extensions" / "pager-launch").exists():
                raise Rejected("the per-launch extension is in the user's ~/.qwen/extensions")
            return (
                f"the launch's session is in the user's own ~/.qwen ({chats[0]}); the user's"
                " settings.json has no Pager entry and no pager-launch extension"
            )

        checks.append(ctx.check("the user's ~/.qwen after the launch", launch, state))

    checks.append(check_typed_prompt(ctx))
    checks.append(
        Check(
            "idle wake",
            UNCHECKED,
            "not wired: Qwen Code takes input into a running session only in its TUI, from"
            ' `--input-file F` (a `{"type":"submit","text":…}` line appended to F runs'
            " that prompt, UserPromptSubmit hook included), or over ACP. Pager has no process"
            " that waits for mail beside the TUI and writes F (Qwen Code's hooks have no"
            " background form, as Claude Code's asyncRewake), and the `[launch] args` would put"
            " `--input-file` before subcommands, which reject it (docs/implementations/qwen.md,"
            " Known gaps)",
        )
    )

    def session(launch: Launch, _out: str) -> tuple[str, str]:
        key = launch.plan.conversation.key or ""  # the wrapper chose it (--session-id)
        chats = list((ctx.home / ".qwen" / "projects").glob(f"*/chats/{key}.jsonl"))
        if not key or not chats:
            raise Unchecked(f"Qwen Code kept no session {key} in ~/.qwen/projects/*/chats")
        return key, f"chosen with --session-id, kept as ~/{chats[0].relative_to(ctx.home)}"

    setup = WakeSetup(
        ["-p", "{first}"],
        session,
        "Pager's hooks from the per-launch extension (SessionStart, UserPromptSubmit) put it"
        " before the model",
    )
    return checks + check_wake(ctx, setup)


def check_typed_prompt(ctx: Context) -> Check:
    """One session over stream-json: mail delivered by the hooks with a `[pager]` prompt (the
    cause stays set), then a prompt as a person types it (its report clears the cause)."""
    args = ["--input-format", "stream-json", "--output-format", "stream-json"]
    with ctx.launch(args) as launch:
        process: Process | None = None

        def typed() -> str:
            nonlocal process
            agent = str(launch.session["agent_id"])
            body = "verify: qwen typed prompt"
            message = ctx.broker.send(ctx.workspace, launch.address, body)
            process = Process(launch.argv, launch.env, ctx.workspace)
            process.write(_user("[pager] verify: a prompt Pager sent"))
            ctx.model.wait_for(body, MAIL_BOUND)
            process.expect(lambda _s, line: '"type":"result"' in line, 60, "the first turn")
            if ctx.broker.wait_state(ctx.workspace, message, 10) != "acknowledged":
                raise Rejected("the model request carried the mail, but it is not acknowledged")
            before = _cause_after_delivery(ctx, agent, message, "the `[pager]` prompt's turn")
            text = "verify: a prompt the person typed"
            process.write(_user(text))
            cleared = ctx.broker.wait_cause_cleared(agent)
            if cleared is None:
                hop, cause = ctx.broker.cause(agent)
                raise Rejected(
                    f"after the hooks' delivery the cause was {before}, as it should be; then a"
                    f" typed prompt went in, but the cause was still cause_hop {hop}, cause_id"
                    f" {cause}: the UserPromptSubmit hook did not report it\n{process.tail()}"
                )
            carried = ""
            with contextlib.suppress(Rejected):
                carried = f"; its model request (POST {ctx.model.wait_for(text, 20)[0]})"
                carried += " carried the prompt"
            return (
                f"mail sent to the session reached the model (by {_delivered_by(ctx, body)})"
                " with a first prompt `[pager] …`, which the UserPromptSubmit hook did not"
                f" count as typed (the cause stayed {before}); then a typed prompt"
                f" (a stream-json user message) and the cause was NULL {cleared:.1f} s later"
                f" (the UserPromptSubmit hook reported it){carried}"
            )

        try:
            return ctx.check("hooks: a typed prompt restarts the chain", launch, typed)
        finally:
            if process is not None:
                process.stop()
                output = launch.redact("".join(process.output))
                (ctx.workspace / "qwen-stream.log").write_text(output)  # for --keep


def _user(text: str) -> str:
    """A user message of Qwen Code's stream-json input (as Claude Code's)."""
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}})


#: How Qwen Code 0.24.4 marks a hook's additionalContext in the model request.
CONTEXT_TAGS = {
    "SessionStart": "<qwen:session-start-context",
    "UserPromptSubmit": "<qwen:user-prompt-submit-context",
}


def _delivered_by(ctx: Context, body: str) -> str:
    """Which of Pager's hooks put `body` into a recorded model request (by Qwen Code's tag
    around a hook's additionalContext)."""
    for _, request in ctx.model.requests:
        at = request.find(body)
        if at < 0:
            continue
        before = request[:at]
        tag = max(CONTEXT_TAGS, key=lambda event: before.rfind(CONTEXT_TAGS[event]))
        if before.rfind(CONTEXT_TAGS[tag]) >= 0:
            return f"the {tag} hook (inside `{CONTEXT_TAGS[tag]}>`)"
    return "no hook's context tag"
