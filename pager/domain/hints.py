"""What to do next, said in the language of the edge that asked: one table for every edge.

An error carries a hint key (`Hint`) beside its code; the text that follows its message is
looked up here by (key, edge) when the error is answered. An agent over MCP is told the tools
and their fields (`roster` with scope 'all'), a person at the command line the commands and
flags (`pager who --all`, `--force`), a client of /v1 the routes and fields. Every error's JSON
carries the key (`"hint"`), so the command line, which speaks /v1, says its own words for it.

Stdlib only, and no more than `enum`: the command line imports this on every refused command.
"""

from __future__ import annotations

import enum

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the command line imports this module
if TYPE_CHECKING:
    from collections.abc import Mapping


class Edge(enum.StrEnum):
    MCP = "mcp"
    CLI = "cli"
    HTTP = "http"


class Hint(enum.StrEnum):
    """What an error tells its reader to do next (the `hint` of an error's JSON)."""

    #: An address that names nobody: the listing of who can be reached.
    ROSTER = "roster"
    #: A message id the caller did not send: where its own sends are.
    OWN_SENDS = "own_sends"
    #: An alias another identity holds: choose another, or take it.
    ALIAS_FORCE = "alias_force"
    #: An alias another identity holds, asked for by a caller without a session (the person
    #: at the terminal), which cannot take it over.
    ALIAS_TAKEN = "alias_taken"
    #: `claim` of a name whose holder is attached: take it over with force.
    CLAIM_FORCE = "claim_force"
    #: `force` on a broker whose config turns takeovers off.
    TAKEOVERS_OFF = "takeovers_off"
    #: `claim` of a name nobody holds: the listing of this workspace's names.
    WHO_LISTS = "who_lists"
    #: A reservation another identity holds stops the request: ask it, or wait.
    RESERVATION_HELD = "reservation_held"
    #: A takeover (`claim`, or a rename with force) asked by a caller without a session (the
    #: person at the terminal, or a harness seen only through its hook): takeovers hand the
    #: identity to a session.
    NEEDS_SESSION = "needs_session"


HINTS: dict[tuple[Hint, Edge], str] = {
    (Hint.ROSTER, Edge.MCP): "see roster (scope 'all' for other workspaces)",
    (Hint.ROSTER, Edge.CLI): "see `pager who` (`pager who --all` for other workspaces)",
    (Hint.ROSTER, Edge.HTTP): "see GET /v1/me/roster (?scope=all for other workspaces)",
    (Hint.OWN_SENDS, Edge.MCP): "message_status shows your own sends",
    (Hint.OWN_SENDS, Edge.CLI): "`pager sent ID` shows your own sends (`pager history` lists them)",
    (Hint.OWN_SENDS, Edge.HTTP): "GET /v1/me/sent/{message_id} shows your own sends",
    (Hint.ALIAS_FORCE, Edge.MCP): "choose another alias, or pass force to take it",
    (Hint.ALIAS_FORCE, Edge.CLI): "choose another name, or add --force to take it",
    (Hint.ALIAS_FORCE, Edge.HTTP): 'choose another alias, or send "force": true to take it',
    (Hint.ALIAS_TAKEN, Edge.MCP): "choose another alias",
    (Hint.ALIAS_TAKEN, Edge.CLI): "choose another name (only a session, started with"
    " `pager <harness>`, can take a name over with --force)",
    (Hint.ALIAS_TAKEN, Edge.HTTP): "choose another alias (only a session's token can take"
    ' it over, with "force": true)',
    (Hint.NEEDS_SESSION, Edge.MCP): "rename without force, or call it from a session of"
    " `pager <harness>`",
    (Hint.NEEDS_SESSION, Edge.CLI): "rename yourself with `pager alias NAME` (without"
    " --force), or run `pager claim NAME` inside a session started with `pager <harness>`",
    (Hint.NEEDS_SESSION, Edge.HTTP): 'rename without "force", or send it with a session\'s'
    " token (a session started with `pager <harness>`)",
    (Hint.CLAIM_FORCE, Edge.MCP): "pass force to end that session and take it over",
    (Hint.CLAIM_FORCE, Edge.CLI): "add --force to end that session and take it over",
    (Hint.CLAIM_FORCE, Edge.HTTP): 'send "force": true to end that session and take it over',
    (Hint.TAKEOVERS_OFF, Edge.MCP): "retry without force: choose another name, or wait until"
    " its holder detaches. To allow takeovers, the user removes that line or sets allow_force"
    " = true, then runs `pager restart`",
    (Hint.TAKEOVERS_OFF, Edge.CLI): "run it again without --force: choose another name, or"
    " wait until its holder detaches. To allow takeovers, remove that line or set allow_force"
    " = true, then run `pager restart`",
    (Hint.TAKEOVERS_OFF, Edge.HTTP): 'retry without "force": choose another name, or wait'
    " until its holder detaches. To allow takeovers, remove that line or set allow_force"
    " = true, then run `pager restart`",
    (Hint.WHO_LISTS, Edge.MCP): "roster lists them",
    (Hint.WHO_LISTS, Edge.CLI): "`pager who` lists them",
    (Hint.WHO_LISTS, Edge.HTTP): "GET /v1/me/roster lists them",
    (Hint.RESERVATION_HELD, Edge.MCP): "ask its holder with send, or wait until it ends"
    " (reservations lists them)",
    (Hint.RESERVATION_HELD, Edge.CLI): "ask its holder (`pager send HOLDER …`), or wait until it"
    " ends (`pager reservations` lists them)",
    (Hint.RESERVATION_HELD, Edge.HTTP): "ask its holder (POST /v1/me/send), or wait until it"
    " ends (GET /v1/me/reservations lists them)",
}

#: Why an ack token was not applied (the `reason` of `ack`'s `not_applied`, SPEC §8), and
#: what to do, per edge: the reasons are codes in the answer, said as words where a person
#: or an agent reads them.
NOT_APPLIED: dict[tuple[str, Edge], str] = {
    ("unknown_token", Edge.MCP): "no message was handed out with this token; ack takes the"
    " tokens fetch gives",
    ("unknown_token", Edge.CLI): "no message was handed out with this token; `pager read`"
    " acknowledges what it shows, and `pager read --no-ack` prints the tokens to give here",
    ("unknown_token", Edge.HTTP): "no message was handed out with this token; ack takes the"
    " tokens POST /v1/me/claim gives",
    ("not_yours", Edge.MCP): "this token was handed to another agent",
    ("not_yours", Edge.CLI): "this token was handed to another agent",
    ("not_yours", Edge.HTTP): "this token was handed to another agent",
    ("already_acknowledged", Edge.MCP): "already acknowledged; nothing to do",
    ("already_acknowledged", Edge.CLI): "already acknowledged; nothing to do",
    ("already_acknowledged", Edge.HTTP): "already acknowledged; nothing to do",
    ("superseded", Edge.MCP): "the message was handed out again since; ack the newer token",
    ("superseded", Edge.CLI): "the message was handed out again since; read it again",
    ("superseded", Edge.HTTP): "the message was handed out again since; ack the newer token",
    ("expired", Edge.MCP): "the message expired before it was acknowledged",
    ("expired", Edge.CLI): "the message expired before it was acknowledged",
    ("expired", Edge.HTTP): "the message expired before it was acknowledged",
}


def hint_text(hint: Hint, edge: Edge) -> str:
    return HINTS[hint, edge]


def with_hint(message: str, hint: Hint | None, edge: Edge) -> str:
    """`message`, then what to do as `edge` says it."""
    return message if hint is None else f"{message}; {HINTS[hint, edge]}"


def for_edge(error: Mapping[str, object], edge: Edge) -> str:
    """The message of an error as the broker answered it (`{code, message, hint?}`), with its
    hint said for `edge` instead, when the key is one this table knows."""
    message = str(error.get("message") or "")
    try:
        hint = Hint(str(error.get("hint")))
    except ValueError:
        return message  # none, or a key of a newer broker: its message as it came
    for said in Edge:
        wording = f"; {HINTS[hint, said]}"
        if message.endswith(wording):
            return with_hint(message.removesuffix(wording), hint, edge)
    return message


def not_applied_text(reason: str, edge: Edge) -> str:
    """Why a token was not applied, in words, then the reason's code (for searching)."""
    words = NOT_APPLIED.get((reason, edge))
    return reason if words is None else f"{words} ({reason})"
