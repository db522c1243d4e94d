"""The reservations check before an edit, against each real harness, for
scripts/verify_harnesses.py (docs/reservations.md, "What is enforced where").

Another identity of the workspace reserves `src/*.py` (the script's sender, over MCP). The
harness is launched as `pager <id>` wires it, with its tools allowed to edit, and the recorder,
standing in for the model, asks for an edit of `src/reserved.py`. The check is accepted when
the edit was refused before it wrote (the file unchanged) and the refusal reached the model (its
next request carries Pager's reason, naming the holder). The same run with `[reservations]
enforce = "off"` in the broker's config.toml (a broken copy of the wiring: the hook asks
nothing) must write the file: so the refusal is the hook's, not the harness's own rules.

Harnesses without a check here are reported as "could not check", with why.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from verify_harnesses import (
    ACCEPTED,
    REJECTED,
    UNCHECKED,
    Canned,
    Check,
    Context,
    Rejected,
    Unchecked,
    _tail,
    run,
)

PROMPT = "verify: change the reserved file"
RESERVED = "src/reserved.py"
BEFORE, AFTER = "value = 1\n", "value = 2\n"
REFUSED = "Pager refused this edit"
#: Harnesses whose pre-tool hook can refuse only by ending the run, and why.
RUN_STOPPED = {
    "cline": "Cline CLI 3.0.65 turns a PreToolUse `cancel` into the end of the run; its hook"
    " output has no way to skip one tool call and tell the model",
}


def check_pre_tool(ctx: Context) -> list[Check]:
    """The check for `ctx`'s harness, when it has one here."""
    edits: dict[str, Callable[[Context], tuple[list[str], list[Canned]]]] = {
        "claude": _claude,
        "gemini": _gemini,
        "qwen": _qwen,
        "cline": _cline,
        "opencode": _opencode,
        "kilo": _kilo,
        "pi": _pi,
        "copilot": _copilot,
        "codex": _codex,
    }
    if ctx.manifest.hooks.pre_tool is None:
        return [Check("edit of a reserved file refused", UNCHECKED, "no [hooks.pre_tool]")]
    setup = edits.get(ctx.id)
    if setup is None:
        why = (
            "not checked against the real binary yet: the recorder would have to answer in this"
            " harness's model API with a tool call (the wiring is tested with fake harnesses)"
        )
        return [Check("edit of a reserved file refused", UNCHECKED, why)]
    return [_refused(ctx, setup), _written_when_off(ctx, setup)]


def _refused(ctx: Context, setup: Callable[[Context], tuple[list[str], list[Canned]]]) -> Check:
    args, answers = setup(ctx)
    target = _prepare(ctx)
    holder = _reserve(ctx)
    for canned in answers:
        ctx.model.answer_once(canned)
    with ctx.launch(args) as launch:

        def body() -> str:
            before = len(ctx.model.requests)
            status, out = run(launch, None, ctx.workspace, 180)
            (ctx.workspace / "pre-tool.log").write_text(launch.redact(out))  # for --keep
            requests = [b for _, b in ctx.model.requests[before:]]
            if not requests:
                raise Unchecked(f"no model request (exit {status}): {_tail(out)}")
            if target.read_text() != BEFORE:
                raise Rejected(f"the edit was written: {target.read_text()!r}; {_tail(out)}")
            told = [b for b in requests if REFUSED in b]
            if ctx.id in RUN_STOPPED:  # the refusal ends the run: no next model request
                return (
                    f"the recorder asked for an edit of {RESERVED}, which {holder} reserved: the"
                    f" hook's cancel stopped the run before it wrote (the file unchanged); the"
                    f" model is not told why ({RUN_STOPPED[ctx.id]}); exit {status}"
                )
            if not told:
                raise Rejected(
                    f"the file is unchanged, but no model request carried Pager's refusal"
                    f" ({len(requests)} requests); {_tail(out)}"
                )
            if holder not in told[0]:
                raise Rejected(f"the refusal does not name the holder {holder}")
            return (
                f"the recorder asked for an edit of {RESERVED}, which {holder} reserved: it was"
                f" refused before it wrote (the file unchanged) and the next model request"
                f" carried the reason ({REFUSED}…, naming {holder}); exit {status}"
            )

        return ctx.check("edit of a reserved file refused before it writes", launch, body)


def _written_when_off(
    ctx: Context, setup: Callable[[Context], tuple[list[str], list[Canned]]]
) -> Check:
    """The broken copy: the hook told to ask nothing. The same edit must then be written."""
    args, answers = setup(ctx)
    target = _prepare(ctx)
    _reserve(ctx)
    for canned in answers:
        ctx.model.answer_once(canned)
    with _enforce_off(ctx), ctx.launch(args) as launch:

        def body() -> str:
            status, out = run(launch, None, ctx.workspace, 180)
            if target.read_text() != AFTER:
                raise Rejected(
                    f"with enforcement off the edit was not written either ({target.read_text()!r})"
                    f" — the refusal above may be the harness's own; {_tail(out)}"
                )
            return f'with `enforce = "off"` the same edit was written (exit {status})'

        check = ctx.check(
            "rejects a broken copy: enforcement off, the edit is written", launch, body
        )
    if check.verdict == ACCEPTED:
        return check
    return Check(check.name, REJECTED if check.verdict == REJECTED else UNCHECKED, check.observed)


def _prepare(ctx: Context) -> Path:
    target = ctx.workspace / RESERVED
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(BEFORE)
    return target


def _reserve(ctx: Context) -> str:
    """`src/*.py` reserved by the script's sender; its address. Given absolute: the run
    directory may lie inside a checkout (this one), whose top the patterns are relative to."""
    pattern = f"{ctx.workspace / 'src'}/*.py"
    arguments = {"paths": [pattern], "reason": "verify: held by another"}
    try:
        taken = ctx.broker._as_sender(ctx.workspace, "reserve", arguments)
    except RuntimeError as exc:
        if "outside your workspace" not in str(exc):
            raise
        # The workspace became a repository of its own (`git init`, for Codex) after the sender
        # joined: a sender that joins now is in it.
        ctx.broker._senders.pop(str(ctx.workspace), None)
        taken = ctx.broker._as_sender(ctx.workspace, "reserve", arguments)
    (held,) = taken["reserved"]
    return str(held["holder"])


@contextlib.contextmanager
def _enforce_off(ctx: Context) -> Iterator[None]:
    config = ctx.broker.paths.root / "config.toml"
    before = config.read_text() if config.exists() else None
    config.write_text((before or "") + '\n[reservations]\nenforce = "off"\n')
    try:
        yield
    finally:
        if before is None:
            config.unlink()
        else:
            config.write_text(before)


# -------------------------------------------------------------------------------- Codex CLI


def _codex(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`codex exec` in a git repository with Pager's hooks trusted (as a person has them once,
    docs/implementations/codex.md) and a sandbox that lets it write the workspace; the
    recorder answers with an `apply_patch` of the file."""
    from verify_harnesses import _codex_home, _codex_wake_ready

    if not (ctx.home / ".codex" / "config.toml").exists():
        _codex_home(ctx)
    _codex_wake_ready(ctx)
    patch = (
        f"*** Begin Patch\n*** Update File: {RESERVED}\n@@\n-{BEFORE.strip()}\n"
        f"+{AFTER.strip()}\n*** End Patch\n"
    )
    item = {"type": "custom_tool_call", "id": "ctc_verify", "call_id": "call_verify_edit",
            "name": "apply_patch", "input": patch, "status": "completed"}  # fmt: skip
    response = {"id": "resp_verify", "object": "response", "status": "completed", "output": [item],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
    events = [
        ("response.created", {"type": "response.created", "response": {**response, "output": []}}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                       "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]  # fmt: skip
    body = "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events)
    canned = Canned("/responses", PROMPT, "text/event-stream", body.encode())
    return ["exec", "--sandbox", "workspace-write", PROMPT], [canned]


# ------------------------------------------------------------------------------ Claude Code


def _claude(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`claude -p` allowed to edit (`--permission-mode acceptEdits`); the recorder answers with
    a Read of the file (Claude Code edits only what it read), then an Edit of it."""
    ctx.env.update(ANTHROPIC_API_KEY="pager-verify-dummy-key", ANTHROPIC_BASE_URL=ctx.model.url)
    ctx.env.update(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    path = str(ctx.workspace / RESERVED)
    read = _anthropic_tool_use("toolu_verify_read", "Read", {"file_path": path})
    edit = _anthropic_tool_use(
        "toolu_verify_edit",
        "Edit",
        {"file_path": path, "old_string": BEFORE.strip(), "new_string": AFTER.strip()},
    )
    answers = [
        Canned("/v1/messages", PROMPT, "text/event-stream", read),
        Canned("/v1/messages", "toolu_verify_read", "text/event-stream", edit),
    ]
    debug = str(ctx.workspace / "claude-pre-tool-debug.log")  # for --keep: the hook lines
    return ["-p", "--permission-mode", "acceptEdits", "--debug-file", debug, PROMPT], answers


# ------------------------------------------------------------------------------- Gemini CLI


def _gemini(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`gemini -p` in yolo mode (edits need no confirmation); the recorder answers with a
    `write_file` call."""
    from verify_harnesses import _gemini_home

    _gemini_home(ctx)
    call = {"name": "write_file", "args": {"file_path": str(ctx.workspace / RESERVED),
                                           "content": AFTER}}  # fmt: skip
    answer = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": call}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    }
    body = ("data: " + json.dumps(answer) + "\r\n\r\n").encode()
    canned = Canned("streamGenerateContent", PROMPT, "text/event-stream", body)
    return ["--approval-mode", "yolo", "-p", PROMPT], [canned]


# -------------------------------------------------------------------- Qwen Code, Cline CLI


def _qwen(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`qwen -p` in yolo mode at the recorder as an OpenAI-compatible provider; the recorder
    answers with a `write_file` call."""
    from verify_qwen import _qwen_home

    _qwen_home(ctx)
    path = str(ctx.workspace / RESERVED)
    answers = [  # Qwen Code 0.24.4 overwrites only a file it read
        _openai_call("read_file", {"file_path": path}, "call_verify_read", PROMPT),
        _openai_call("write_file", {"file_path": path, "content": AFTER}, "call_verify_edit",
                     "call_verify_read"),
    ]  # fmt: skip
    return ["--approval-mode", "yolo", "-p", PROMPT], answers


def _cline(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`cline --json --yolo` at the recorder (`cline auth`); the recorder answers with an
    `editor` call replacing the file's text."""
    from verify_cline import _cline_home

    _cline_home(ctx)
    arguments = {"path": str(ctx.workspace / RESERVED), "old_text": BEFORE.strip(),
                 "new_text": AFTER.strip()}  # fmt: skip
    return ["--json", "--yolo", PROMPT], [_openai_call("editor", arguments)]


def _opencode(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`opencode run` at the recorder as an OpenAI-compatible provider (chat completions); the
    recorder answers the request that offers tools (not the title's) with a `read` of the file
    (OpenCode edits only what it read), then an `edit` of it."""
    config = ctx.home / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    (config / "opencode.json").write_text(json.dumps(_opencode_config(ctx, "opencode")))
    return ["run", PROMPT], _read_then_edit(ctx)


def _kilo(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`kilo run`, as OpenCode's (Kilo CLI is its fork)."""
    from verify_kilo import _kilo_home

    _kilo_home(ctx)
    return ["run", PROMPT], _read_then_edit(ctx)


def _opencode_config(ctx: Context, own: str) -> dict[str, Any]:
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Recorder",
        "options": {"baseURL": f"{ctx.model.url}/v1", "apiKey": "pager-verify-dummy-key"},
        "models": {"gpt-4o-mini": {"name": "gpt-4o-mini"}},
    }
    return {
        "provider": {"recorder": provider},
        "model": "recorder/gpt-4o-mini",
        "small_model": "recorder/gpt-4o-mini",
        "disabled_providers": [own],
        "autoupdate": False,
        "share": "disabled",
    }


def _read_then_edit(ctx: Context) -> list[Canned]:
    path = str(ctx.workspace / RESERVED)
    edit = {"filePath": path, "oldString": BEFORE.strip(), "newString": AFTER.strip()}
    return [
        _openai_call("read", {"filePath": path}, "call_verify_read", '"name":"edit"'),
        _openai_call("edit", edit, "call_verify_edit", "call_verify_read"),
    ]


def _pi(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`pi -p` with the launch's extension, at the recorder; the recorder answers with a
    `write` of the file."""
    from verify_harnesses import _pi_home

    _pi_home(ctx)
    arguments = {"path": str(ctx.workspace / RESERVED), "content": AFTER}
    args = ["-p", "--no-session", "--offline", "--model", "pager-verify/none", PROMPT]
    return args, [_openai_call("write", arguments)]


def _copilot(ctx: Context) -> tuple[list[str], list[Canned]]:
    """`copilot -p` offline at the recorder, every tool allowed; the recorder answers with an
    `apply_patch` of the file (with gpt-4o, Copilot CLI 1.0.102 offers only this freeform tool
    to edit files)."""
    from verify_copilot import _copilot_home

    _copilot_home(ctx)
    patch = (
        f"*** Begin Patch\n*** Update File: {ctx.workspace / RESERVED}\n@@\n-{BEFORE.strip()}\n"
        f"+{AFTER.strip()}\n*** End Patch\n"
    )
    call = {"index": 0, "id": "call_verify_edit", "type": "custom"}
    call["custom"] = {"name": "apply_patch", "input": patch}
    return ["-p", PROMPT, "--allow-all-tools"], [_openai_canned(call, PROMPT)]


def _openai_call(
    name: str,
    arguments: dict[str, Any],
    ident: str = "call_verify_edit",
    needle: str = PROMPT,
) -> Canned:
    """One streamed OpenAI chat completion: a single function call."""
    call: dict[str, Any] = {"index": 0, "id": ident, "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}
    return _openai_canned(call, needle)


def _openai_canned(call: dict[str, Any], needle: str) -> Canned:
    """One streamed OpenAI chat completion whose answer is the tool call `call`."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": "verify", "object": "chat.completion.chunk", "created": 0}
        return "data: " + json.dumps({**body, "model": "gpt-4o", "choices": [choice]}) + "\n\n"

    text = chunk({"role": "assistant", "content": None, "tool_calls": [call]})
    text += chunk({}, "tool_calls") + "data: [DONE]\n\n"
    return Canned("/chat/completions", needle, "text/event-stream", text.encode())


def _anthropic_tool_use(ident: str, name: str, arguments: dict[str, Any]) -> bytes:
    """One streamed Messages API answer: a single tool call."""
    message = {
        "id": f"msg_{ident}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    block = {"type": "tool_use", "id": ident, "name": name, "input": {}}
    delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events).encode()
