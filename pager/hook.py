"""`pager hook [EVENT]`: inject waiting mail into a harness session (SPEC §10).

Runs on every prompt, so it is stdlib-only and imports nothing of the server stack. It reads
the harness's hook payload on stdin, finds the session by its conversation key, claims what
is waiting, prints it in the harness's output format inside the envelope, and acknowledges only
after the write. It fails open: on any error it prints nothing, exits 0 and logs one line.

    pager hook [--implementation ID] [--format claude|codex|gemini|copilot|cline|text]
               [--max-chars N] [--wait [--wait-max SECONDS]] [--prompt-only]
               [--pre-tool SPEC] [EVENT]

`--wait` is for a harness's background "wake" hook (Claude Code's `asyncRewake`): it waits
until mail arrives for the session, writes it to stderr and exits 2, which wakes an idle
session; it exits 0 with nothing when `--wait-max` passes first. `--prompt-only` is for an
event that fires once per typed prompt and whose output the harness ignores: it reports the
prompt for the session of `PAGER_TOKEN_FILE` and claims nothing. `--pre-tool SPEC` is for
the harness's event before a tool runs: it refuses a file-writing call on a path another live
agent holds exclusively (pager/pretool.py, SPEC the manifest's `[hooks.pre_tool]` as JSON).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any

#: One long poll of `--wait` (the broker allows up to 60 s).
WAIT_SLICE = 50.0
#: Exit status that makes Claude Code wake the session and show stderr (asyncRewake).
WAKE_STATUS = 2

#: Hook payloads are small JSON objects; anything larger is not one.
MAX_PAYLOAD = 1024 * 1024
TIMEOUT = 5.0
FORMATS = ("claude", "codex", "gemini", "copilot", "cline", "text")


class HookSkipped(Exception):
    """Nothing to do, for a reason worth one log line."""


USAGE = """usage: pager hook [--implementation ID] [--format claude|codex|gemini|copilot|cline|text]
                  [--max-chars N] [--wait [--wait-max SECONDS]] [--prompt-only]
                  [--pre-tool SPEC] [EVENT]
       pager hook --git-pre-commit

The hook entry point a harness runs (its hook payload on stdin): prints the session's waiting
mail in the harness's format and acknowledges it once written. It fails open: on any problem
it prints nothing and exits 0 (see logs/hook.log in the state directory). `--wait` waits for
mail and exits 2 with it on stderr (a background wake hook). `--pre-tool SPEC` refuses a
file-writing tool call on a path another agent reserved (docs/reservations.md);
`--git-pre-commit` is the git guard (exit 1 refuses the commit). See docs/skill-and-plugins.md.
"""


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if argv == ["--git-pre-commit"]:  # the git guard: exit 1 refuses the commit
        from pager.git_guard import main as guard

        return guard()
    try:
        options = _parse(argv)
        return _run(options)
    except HookSkipped as why:
        _log(f"skipped: {why}")
    except BaseException as exc:  # fail open, whatever happened
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return 0
        _log(f"failed: {type(exc).__name__}: {exc}")
    return 0


def _parse(argv: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {
        "implementation": os.environ.get("PAGER_IMPLEMENTATION", "claude"),
        "format": None,
        "max_chars": 9000,
        "event": None,
        "wait": False,
        "wait_max": 3600.0,
        "prompt_only": False,
        "pre_tool": None,
    }
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in ("--implementation", "--format", "--max-chars", "--wait-max", "--pre-tool"):
            value = value if eq else next(args, "")
            key = name[2:].replace("-", "_")
            converters = {"max_chars": int, "wait_max": float}
            options[key] = converters[key](value) if key in converters else value
        elif arg == "--wait":
            options["wait"] = True
        elif arg == "--prompt-only":
            options["prompt_only"] = True
        elif arg.startswith("-"):
            raise HookSkipped(f"unknown option {arg!r}")
        else:
            options["event"] = arg
    options["format"] = options["format"] or options["implementation"]
    if options["format"] not in FORMATS:
        options["format"] = "text"
    return options


def _run(options: dict[str, Any]) -> int:
    raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if len(raw) > MAX_PAYLOAD:
        raise HookSkipped("payload larger than 1 MiB")
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise HookSkipped(f"payload is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookSkipped("payload is not a JSON object")
    if options["prompt_only"]:
        return _report_prompt()
    if options["pre_tool"] is not None:
        return _pre_tool(options, payload)
    key = _conversation_key(payload)
    if not isinstance(key, str) or not key:
        raise HookSkipped("payload names no session_id")
    event = options["event"] or payload.get("hook_event_name") or "UserPromptSubmit"

    from pager.client import request_json  # stdlib only: _socket and _json
    from pager.launch.discovery import discover
    from pager.launch.files import session_token
    from pager.launch.paths import StatePaths

    home = _state_dir()
    # Never a remembered URL: only a broker that proved it knows the secret gets it (and the
    # session token), and only its text reaches the harness.
    found = discover(StatePaths(Path(home)), timeout=TIMEOUT)
    if found.broker is None:
        raise HookSkipped(f"no broker ({found.reason})")
    url = found.broker.url
    secret = _read(os.path.join(home, "secret")).strip()
    claim = {
        "implementation": options["implementation"],
        "conversation_key": key,
        "max_chars": options["max_chars"],
    }
    token = session_token(os.environ)
    if token:  # inside `pager <implementation>`: binds a new id
        claim["session_token"] = token
    if _typed_prompt(str(event), payload):
        claim["prompted"] = True
    from pager.launch.ancestry import harness_ancestor

    harness = harness_ancestor(frozenset({options["implementation"]}))
    if harness is not None:  # so that a command its agent runs finds this session (§4.2)
        claim["harness"] = f"{harness[0]}:{harness[1]}"
    deadline = time.monotonic() + options["wait_max"]
    while True:
        wait_s = min(WAIT_SLICE, max(0.0, deadline - time.monotonic())) if options["wait"] else 0
        status, answer = request_json(
            url,
            "POST",
            "/v1/hook/claim",
            body={**claim, "wait_s": wait_s},
            token=secret,
            timeout=TIMEOUT + wait_s,
        )
        if status != 200 or not isinstance(answer, dict):
            raise HookSkipped(f"broker answered {status}: {answer}")
        text, tokens = answer.get("text") or "", answer.get("tokens") or []
        if text and tokens:
            break
        if not options["wait"] or time.monotonic() >= deadline:
            return 0
    if options["wait"]:
        sys.stderr.write(text + "\n")  # shown to the woken session
        sys.stderr.flush()
    else:
        sys.stdout.write(_format(options["format"], str(event), text))
        sys.stdout.flush()  # written: only now may the messages count as received
    request_json(
        url,
        "POST",
        "/v1/hook/ack",
        body={"agent_id": answer["agent_id"], "tokens": tokens},
        token=secret,
        timeout=TIMEOUT,
    )
    return WAKE_STATUS if options["wait"] else 0


def _report_prompt() -> int:
    """`--prompt-only`: a hook the harness runs once per prompt a person typed, whose output it
    ignores (Cline CLI's TaskStart). It says so for the session of `PAGER_TOKEN_FILE` (its
    next send starts a new chain, SPEC §8.1) and claims no mail: mail printed here would be
    acknowledged without reaching the model. The first turn after the launch's knock is not
    a typed one: it takes the knock's mark instead."""
    from pager.client import request_json
    from pager.launch.discovery import discover
    from pager.launch.files import session_token
    from pager.launch.paths import StatePaths

    token = session_token(os.environ)
    if not token:
        raise HookSkipped("--prompt-only outside `pager <implementation>` (no session token)")
    if _knocked():
        raise HookSkipped("the turn of the launch's knock (its [pager] prompt), not a typed one")
    found = discover(StatePaths(Path(_state_dir())), timeout=TIMEOUT)
    if found.broker is None:
        raise HookSkipped(f"no broker ({found.reason})")
    status, answer = request_json(
        found.broker.url, "POST", "/v1/sessions/current/prompted", token=token, timeout=TIMEOUT
    )
    if status != 200:
        raise HookSkipped(f"broker answered {status}: {answer}")
    return 0


def _pre_tool(options: dict[str, Any], payload: dict[str, Any]) -> int:
    """`--pre-tool SPEC`: refuse (or note) a file-writing tool call on a path another live
    agent holds exclusively (pager/pretool.py); print nothing to let it through."""
    from pager import pretool

    event = options["event"] or payload.get("hook_event_name") or "PreToolUse"
    try:
        answer = pretool.run(options["pre_tool"], str(event), payload, options["implementation"])
    except pretool.Skipped as why:
        raise HookSkipped(f"pre-tool: {why}") from None
    if answer:
        sys.stdout.write(answer)
        sys.stdout.flush()
    return 0


def _knocked() -> bool:
    """The launch knocked and this is the first turn since (pager/launch/knock_mark.py): the
    mark lives in the launch's private directory, beside the session's token file."""
    from pager.launch.knock_mark import take_mark

    token_file = os.environ.get("PAGER_TOKEN_FILE", "")
    return bool(token_file) and take_mark(Path(token_file).parent)


def _conversation_key(payload: dict[str, Any]) -> Any:
    """The harness's session id: `session_id`; GitHub Copilot CLI's camelCase `sessionId`; Cline
    CLI's `sessionContext.rootSessionId` (its `taskId` is a per-run conversation, not the session
    `cline --id` resumes); Gemini CLI's environment."""
    context = payload.get("sessionContext")
    root = context.get("rootSessionId") if isinstance(context, dict) else None
    return (
        payload.get("session_id")
        or payload.get("sessionId")
        or root
        or os.environ.get("GEMINI_SESSION_ID")
    )


#: The events whose payload carries the prompt the user submitted (Gemini CLI's BeforeAgent,
#: GitHub Copilot CLI's userPromptSubmitted).
PROMPT_EVENTS = ("UserPromptSubmit", "BeforeAgent", "userPromptSubmitted")


def _typed_prompt(event: str, payload: dict[str, Any]) -> bool:
    """A person typed this prompt (SPEC §8.1): a prompt event with text, other than the text
    Pager's own wake put there (it starts with the envelope's `[pager]` preamble)."""
    prompt = payload.get("prompt")
    return (
        event in PROMPT_EVENTS
        and isinstance(prompt, str)
        and bool(prompt.strip())
        and not prompt.lstrip().startswith("[pager]")
    )


def _format(kind: str, event: str, text: str) -> str:
    if kind == "text":
        return text + "\n"
    if kind == "copilot":  # GitHub Copilot CLI reads `additionalContext` at the top level
        return json.dumps({"additionalContext": text}) + "\n"
    if kind == "cline":  # Cline CLI adds a hook's `contextModification` to the next request
        return json.dumps({"contextModification": text}) + "\n"
    output = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return json.dumps(output) + "\n"


def _state_dir() -> str:
    from pager.launch.statedir import state_dir

    return state_dir()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as exc:
        raise HookSkipped(f"no broker ({exc.strerror}: {path})") from None


def _log(line: str) -> None:
    try:
        logs = os.path.join(_state_dir(), "logs")
        if os.path.isdir(logs):
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            with open(os.path.join(logs, "hook.log"), "a", encoding="utf-8") as file:
                file.write(f"{stamp} pid {os.getpid()} {line}\n")
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
