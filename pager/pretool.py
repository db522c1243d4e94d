"""`pager hook --pre-tool SPEC EVENT`: refuse a file-writing tool call on a path another live
agent holds exclusively (docs/reservations.md, "What is enforced where").

A harness runs it before each tool call, so, as `pager hook`, it is stdlib-only and imports
nothing of the server stack; a call that writes nothing (a read, a search) returns before any
import or connection. SPEC is the manifest's `[hooks.pre_tool]` as compact JSON (the connector
puts it on the hook's command line): where the payload names the tool and its arguments, which
tools write which argument's path, which run a shell command, which apply a patch, and how the
harness reads a refusal. Nothing here knows a harness by its id.

It fails open: no broker, a slow or malformed answer, a payload it cannot read: the tool call
goes ahead, silently (one line in logs/hook.log).
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any

#: The check is one indexed read; a broker slower than this lets the edit through.
CHECK_TIMEOUT = 2.0
#: At most this many paths asked about for one tool call (the check takes up to 100).
MAX_PATHS = 100
#: Shell words that write (or remove) each of their operands.
WRITES_OPERANDS = frozenset({"rm", "mv", "touch", "truncate", "tee", "unlink", "shred", "rmdir"})
#: Shell words that write their last operand.
WRITES_LAST = frozenset({"cp", "install", "ln", "rsync"})
#: Words that run the command after them.
PREFIXES = frozenset({"sudo", "command", "env", "exec", "nohup", "time"})
SHELL_BREAKS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})


class Skipped(Exception):
    """Nothing to check, for a reason worth one log line."""


def run(spec_text: str, event: str, payload: dict[str, Any], implementation: str) -> str:
    """What to print for this tool call: nothing (allowed), or the harness's refusal or note."""
    spec = json.loads(spec_text)
    if not isinstance(spec, dict):
        raise Skipped("--pre-tool is not a JSON object")
    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else os.getcwd()
    paths = written_paths(spec, payload, cwd)
    if not paths:
        return ""
    from pager.enforce import mode_for

    mode = mode_for(cwd)
    if mode == "off":
        return ""
    conflicts = ask(paths[:MAX_PATHS], implementation=implementation)
    if not conflicts:
        return ""
    text = explain(conflicts, refused=mode == "deny")
    return render(str(spec.get("refusal", "claude")), event, text, refused=mode == "deny")


# -- which paths a tool call writes ------------------------------------------------------------


def written_paths(spec: dict[str, Any], payload: dict[str, Any], cwd: str) -> list[str]:
    """The absolute paths the call would write, as far as its arguments name them."""
    tool = _dig(payload, spec.get("tool", "tool_name"))
    if not isinstance(tool, str):
        return []
    arguments = _dig(payload, spec.get("input", "tool_input"))
    if isinstance(arguments, str):  # GitHub Copilot CLI's toolArgs: JSON text
        arguments = _decoded(arguments)
    if isinstance(arguments, str):  # the whole input is the tool's text: `patches = {tool = ""}`
        whole = _table(spec, "patches").get(tool) == ""
        return _absolutes(patch_targets(arguments) if whole else [], cwd)
    if not isinstance(arguments, dict):
        return []
    found: list[str] = []
    for key in _table(spec, "paths").get(tool, ()):
        value = arguments.get(key)
        found += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    shell_key = _table(spec, "shell").get(tool)
    if isinstance(shell_key, str):
        for command in _commands(arguments.get(shell_key)):
            found += shell_targets(command) + patch_targets(command)  # `apply_patch <<EOF`
    patch_key = _table(spec, "patches").get(tool)
    if isinstance(patch_key, str) and isinstance(arguments.get(patch_key), str):
        found += patch_targets(arguments[patch_key])
    where = arguments.get("cwd")
    return _absolutes(found, os.path.join(cwd, where) if isinstance(where, str) else cwd)


def _absolutes(found: list[str], cwd: str) -> list[str]:
    return list(dict.fromkeys(_absolute(p, cwd) for p in found if p and "\0" not in p))


def shell_targets(command: str) -> list[str]:
    """Best effort: the operands of `rm`, `mv`, `touch`, `tee`, `git rm`, `git mv`, … (every
    one), of `cp`, `install`, `ln` (the last), `sed -i` (the files), and the targets of `>` and
    `>>`. A command that builds its paths (variables, `$(…)`, `find -delete`, a script) is not
    seen."""
    import shlex

    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # unbalanced quotes: not a command the shell would run either
        return []
    targets: list[str] = []
    simple: list[str] = []
    redirect = False
    for word in [*words, ";"]:
        if redirect:
            targets.append(word)
            redirect = False
        elif word in (">", ">>", ">|", "&>", "&>>"):
            redirect = True
        elif word in SHELL_BREAKS or set(word) <= set(";&|()<>"):
            targets += _operands(simple)
            simple = []
        else:
            simple.append(word)
    return targets


def _operands(words: list[str]) -> list[str]:
    while words and (words[0] in PREFIXES or "=" in words[0].lstrip("=")):
        words = words[1:]  # `sudo rm x`, `LC_ALL=C sed -i …`
    if not words:
        return []
    name = os.path.basename(words[0])
    operands = [w for w in words[1:] if not w.startswith("-")]
    if name in WRITES_OPERANDS:
        return operands
    if name in WRITES_LAST:
        return operands[-1:]
    if name == "sed" and any(w.startswith("-i") or w == "--in-place" for w in words[1:]):
        return operands[1:]  # the first operand is the script
    if name == "git" and operands[:1] in (["rm"], ["mv"]):
        return operands[1:]
    return []


def _decoded(text: str) -> Any:
    """JSON text decoded; other text (a freeform tool's, Copilot CLI's apply_patch) as is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _commands(value: object) -> list[str]:
    """A command, or a list of them (Cline CLI's `run_commands`, which its hooks get as JSON
    text)."""
    if isinstance(value, str) and value.startswith("["):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return [text]  # a command that starts with `[` (a test)
    if isinstance(value, str):
        return [value]
    listed: list[object] = value if isinstance(value, list) else []
    return [v for v in listed if isinstance(v, str)]


def patch_targets(patch: str) -> list[str]:
    """The files an `apply_patch` envelope adds, updates, deletes or moves to."""
    targets = []
    for line in patch.splitlines():
        for marker in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
            if line.startswith(marker):
                targets.append(line[len(marker) :].strip())
    return targets


def _dig(payload: dict[str, Any], dotted: object) -> Any:
    value: Any = payload
    for part in str(dotted).split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _table(spec: dict[str, Any], key: str) -> dict[str, Any]:
    table = spec.get(key)
    return table if isinstance(table, dict) else {}


def _absolute(path: str, cwd: str) -> str:
    """`path` from `cwd`, its links resolved: an edit through a symbolic link (or a linked
    directory) is an edit of the file it points at."""
    if path.startswith("~/"):
        path = os.path.expanduser(path)
    return os.path.realpath(os.path.join(cwd, path))


# -- the broker's answer -----------------------------------------------------------------------


def ask(
    paths: list[str], *, implementation: str | None = None, workspace: str | None = None
) -> list[dict[str, Any]]:
    """The conflicts the broker reports for `paths` (at most 100), as `_where` says who asks."""
    from pager.client import request_json

    url, token, query = _where(implementation, workspace)
    status, answer = request_json(
        url,
        "POST",
        "/v1/me/reservations/check" + query,
        body={"paths": paths},
        token=token,
        timeout=CHECK_TIMEOUT,
    )
    if status != 200 or not isinstance(answer, dict):
        raise Skipped(f"the check answered {status}: {str(answer)[:200]}")
    conflicts = answer.get("conflicts")
    if not isinstance(conflicts, list):
        raise Skipped("the check's answer has no conflicts list")
    return [c for c in conflicts if isinstance(c, dict)]


def _where(implementation: str | None, workspace: str | None) -> tuple[str, str, str]:
    """(the broker or relay URL, the bearer, the query): the launch relay's when the harness
    passed its environment on; else the broker that proves itself, with the session's token;
    for a session started without `pager`, the local secret and the `implementation`'s
    harness process; else (the git guard at a terminal) the person in `workspace`."""
    url, relay = os.environ.get("PAGER_URL"), os.environ.get("PAGER_TOKEN")
    if url and relay:
        return url, relay, ""
    from pathlib import Path

    from pager.launch.discovery import discover
    from pager.launch.files import session_token
    from pager.launch.paths import StatePaths
    from pager.launch.statedir import state_dir

    home = state_dir()
    found = discover(StatePaths(Path(home)), timeout=CHECK_TIMEOUT)
    if found.broker is None:
        raise Skipped(f"no broker ({found.reason})")
    token = session_token(os.environ)
    if token:
        return found.broker.url, token, ""
    from urllib.parse import quote

    from pager.launch.ancestry import harness_ancestor

    harness = harness_ancestor(frozenset({implementation})) if implementation else None
    if harness is None and workspace is None:
        raise Skipped("no session: neither the launch's token nor a known harness process")
    with open(os.path.join(home, "secret"), encoding="utf-8") as file:
        secret = file.read().strip()
    if harness is not None:
        return found.broker.url, secret, f"?harness={harness[0]}:{harness[1]}"
    return found.broker.url, secret, f"?workspace={quote(str(workspace))}"


# -- what the model is told --------------------------------------------------------------------


def explain(conflicts: list[dict[str, Any]], *, refused: bool) -> str:
    """Who holds what, why, until when, and how to ask: for the model."""
    lines = []
    for c in conflicts[:10]:
        holder = str(c.get("holder") or c.get("agent_id") or "another agent")
        reason = f" ({c['reason']})" if c.get("reason") else ""
        lines.append(
            f"- {c.get('path')} is reserved exclusively by {holder} as {c.get('pattern')}{reason}"
            f' until {c.get("until")}; ask them: pager send {holder} "…"'
        )
    if len(conflicts) > 10:
        lines.append(f"- and {len(conflicts) - 10} more")
    head = (
        "Pager refused this edit: another agent is changing these files."
        if refused
        else "Pager: another agent has reserved these files; this edit may overwrite their work."
    )
    tail = (
        "Do not work around this. Ask the holder (the pager `send` tool or `pager send`), work on"
        " something else, or wait until the reservation ends (`pager reservations` lists them)."
    )
    return "\n".join([head, *lines, tail])


def render(refusal: str, event: str, text: str, *, refused: bool) -> str:
    """`text` in the shape the harness reads from a pre-tool hook."""
    if refusal == "decision":  # Gemini CLI's BeforeTool
        shaped: dict[str, Any] = (
            {"decision": "deny", "reason": text} if refused else {"systemMessage": text}
        )
    elif refusal == "copilot":
        shaped = (
            {"permissionDecision": "deny", "permissionDecisionReason": text}
            if refused
            else {"additionalContext": text}
        )
    elif refusal == "cline":
        shaped = (
            {"cancel": True, "errorMessage": text}
            if refused
            else {"cancel": False, "contextModification": text}
        )
    else:  # claude: Claude Code's, Qwen Code's and Codex's PreToolUse
        specific: dict[str, Any] = {"hookEventName": event}
        if refused:
            specific |= {"permissionDecision": "deny", "permissionDecisionReason": text}
        else:
            specific["additionalContext"] = text
        shaped = {"hookSpecificOutput": specific}
    return json.dumps(shaped) + "\n"
