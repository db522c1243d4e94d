"""The everyday commands of SPEC §4.1 (`send`, `inbox`, `read`, `ack`, `alias`, `claim`,
`whoami`, `who`, `history`, `sent`): thin clients of `/v1/me/…`, which runs every rule, acting
as `pager.commands.acting.Me` says.

Stdlib-only, like `pager status` and the hook: a script or an agent's shell tool runs these
often.
"""

from __future__ import annotations

import os
import sys
import time

from pager.commands.acting import Me, Operator, local_secret
from pager.commands.common import (
    EXIT_NO_MAIL,
    EXIT_OK,
    BrokerRefused,
    CommandError,
    call_broker,
    state_paths,
)
from pager.commands.show import (
    ago,
    first_line,
    json_text,
    one_line,
    person_view,
    print_json,
    table,
)
from pager.domain.display import for_terminal

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any

#: What each wake outcome means to a person (SPEC §8 `send`): the message is queued either way.
WAKES = {
    "delivered": "its session was told now",
    "queued": "its session will see it at its next turn",
    "no_session": "no session is running for it: it waits in the inbox",
}
#: `queued` for a recipient whose harness has no turns that show it mail (a shell program).
QUEUED_UNTIL_READ = "it waits in its inbox: pager read"


def _check_body(body: str) -> None:
    """Refuse a body over the limit here, with the broker's own words, whatever its size,
    rather than send it (a request over the broker's request cap would be answered with that
    cap, not the body's limit). The configuration is read only for a body over the default
    limit: it may have been raised (`[limits] body_cap`), and most sends are far below it."""
    from pager.domain.body_limit import BODY_CAP, body_size, oversized_body

    size = body_size(body)
    if size <= BODY_CAP:
        return  # under the default; the broker checks a lowered limit itself
    from pager.commands.acting import CommandRefused
    from pager.commands.common import add_site_packages

    add_site_packages()  # the configuration's reader needs installed packages (attrs)
    from pager.config import ConfigError, load_config

    try:
        cap = load_config(state_paths().config).limits.body_cap
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    if size > cap:
        raise CommandRefused(oversized_body(size, cap), "oversized_content")


def cmd_send(args: argparse.Namespace) -> int:
    body = args.body
    if body is None or body == "-":
        if body is None and sys.stdin.isatty():
            raise CommandError("give the message: pager send TO BODY (or `-` to read stdin)")
        body = sys.stdin.read()
    _check_body(body)
    request: dict[str, Any] = {"to": args.to, "body": body}
    for key, value in (("thread", args.thread), ("reply_to", args.reply_to),
                       ("idempotency_key", args.key)):  # fmt: skip
        if value is not None:
            request[key] = value
    sent = Me().call("POST", "/send", request)
    if args.json:
        print_json(sent)
        return EXIT_OK
    again = " (a repeat of an earlier send: nothing new was sent)" if sent.get("duplicate") else ""
    wake = _wake_text(str(sent.get("wake")), sent["recipient"])
    address = one_line(sent["recipient"]["address"])
    print(f"sent {one_line(sent['message_id'])} to {address}{again}; {one_line(wake)}")
    return EXIT_OK


def _wake_text(wake: str, recipient: dict[str, Any]) -> str:
    """What a send's wake outcome means for this recipient: queued mail is seen at the next
    turn only by a harness that is shown mail at its turns (the broker says which is not)."""
    if wake == "queued" and recipient.get("waits_to_be_read") is True:
        return QUEUED_UNTIL_READ
    return WAKES.get(wake, wake)


def cmd_inbox(args: argparse.Namespace) -> int:
    if args.all:
        return _all_inboxes(args)
    me = Me()
    inbox = me.call("GET", f"/inbox?limit={args.limit}")
    if args.json:
        print_json(inbox)
        return EXIT_OK
    messages = inbox["messages"]
    if not messages:
        print("no mail waiting")
    else:
        now = time.time()
        rows = [
            [m["id"], m["from"], ago(m["sent_at"], now), m["thread"] or "-", first_line(m["body"])]
            for m in messages
        ]
        print(table(["ID", "FROM", "AGE", "THREAD", "FIRST LINE"], rows))
        more = inbox["waiting"] - len(messages)
        if more > 0:
            print(f"… and {more} more (pager inbox -n {inbox['waiting']})")
        print("read them with `pager read`")
    if _view(me, args) == PERSON:
        _say_mail_elsewhere(me)
    return EXIT_OK


def _all_inboxes(args: argparse.Namespace) -> int:
    """`inbox --all`: every inbox with mail waiting, as three stable columns (for status bars
    and scripts): its address, how many wait, whether a session is attached."""
    snapshot = Operator().call("GET", "/v1/snapshot")
    rows = [
        (agent["address"], int(agent["inbox"]["queued"]), bool(agent["attached"]))
        for workspace in snapshot["workspaces"]
        for agent in workspace["agents"]
        if agent["inbox"]["queued"] and not agent["archived"]
    ]
    if args.json:
        print_json([{"inbox": a, "waiting": w, "attached": t} for a, w, t in rows])
        return EXIT_OK
    lines = [[a, str(w), "yes" if t else "no"] for a, w, t in rows]
    print(table(["INBOX", "WAITING", "ATTACHED"], lines))
    return EXIT_OK


#: The two ways `read` shows mail without --json (docs/cli.md): a person's, and an agent's.
PERSON, AGENT = "person", "agent"


def _view(me: Me, args: argparse.Namespace) -> str:
    """The person's view for the person at a terminal; Pager's envelope for a session or a
    harness's identity (an agent's shell tool), and for output that is not a terminal (a
    script, a pipe into a model); `--view` says which."""
    if args.view is not None:
        return str(args.view)
    return PERSON if me.acts_as_person and sys.stdout.isatty() else AGENT


def _say_mail_elsewhere(me: Me) -> None:
    """Tell the person where else mail waits for them: their identities in the other
    workspaces of this machine (each reads it there)."""
    import shlex

    mine = me.call("GET", "")
    secret = local_secret(me.paths)
    snapshot = call_broker(me.url, "GET", "/v1/snapshot", token=secret)
    here = [
        agent
        for workspace in snapshot["workspaces"]
        for agent in workspace["agents"]
        if agent["agent_id"] == mine["agent_id"]
    ]
    host = here[0]["host"] if here else None
    for workspace in snapshot["workspaces"]:
        for agent in workspace["agents"]:
            waiting = int(agent["inbox"]["queued"])
            if (
                waiting
                and agent["implementation"] == mine["implementation"]  # the person's
                and agent["durable"]
                and not agent["archived"]
                and agent["agent_id"] != mine["agent_id"]
                and agent["host"] == host  # a path of this machine
            ):
                go = f"cd {shlex.quote(workspace['path'])} && pager read"
                print(one_line(f"{waiting} more for you in {workspace['slug']}: {go}"))


def cmd_read(args: argparse.Namespace) -> int:
    me = Me()
    view = "json" if args.json else _view(me, args)
    if not args.follow:
        found = _read(me, args, view)
        if view == PERSON:
            _say_mail_elsewhere(me)
        return found
    who = me.call("GET", "")
    attached = _attach_person(me, who["alias"])
    if sys.stderr.isatty() and me.acts_as_person:
        print(f"waiting for mail to {one_line(who['address'])}; Ctrl-C to stop", file=sys.stderr)
    try:
        return _read(me, args, view)
    finally:
        if attached:
            _detach(me)


def _attach_person(me: Me, alias: str) -> bool:
    """While `read --follow` runs, the person shows as attached (SPEC §4.2): it reads through
    a session of the person's identity, detached when it ends (or lapsing with its lease when
    it is killed). A second follower in the workspace reads as the person, without one."""
    if not me.acts_as_person:
        return False  # a session or a harness's identity: attached or not by its own launch
    from pager.domain.addressing import PERSON

    request = {"workspace": os.getcwd(), "implementation": PERSON, "session_name": alias}
    try:
        opened = call_broker(me.url, "POST", "/v1/register", token=me.credential, body=request)
    except BrokerRefused as refused:
        if refused.code == "alias_conflict":
            return False  # another `read --follow` holds it
        raise CommandError(me.advice(refused)) from None
    me.credential, me.query = str(opened["token"]), ""
    return True


def _detach(me: Me) -> None:
    from contextlib import suppress

    with suppress(CommandError):  # else its lease lapses instead
        call_broker(me.url, "POST", "/v1/sessions/current/detach", token=me.credential, body={})


def _read(me: Me, args: argparse.Namespace, view: str) -> int:
    wait = args.wait
    while True:
        # The broker waits at most 60 s per call; --wait longer, and --follow, call again.
        deadline = time.monotonic() + wait
        claims: list[dict[str, Any]] = []
        while True:
            slice_s = min(60.0, max(0.0, deadline - time.monotonic())) if not args.follow else 60.0
            body = {"limit": args.count, "wait_s": slice_s}
            claims = me.call("POST", "/claim", body, timeout=slice_s + 30)["claims"]
            if claims or (not args.follow and time.monotonic() >= deadline):
                break
        _show(claims, args, view)
        if not args.no_ack and claims:
            me.call("POST", "/ack", {"tokens": [c["token"] for c in claims]})
        if not args.follow:
            if claims:
                return EXIT_OK
            if not args.json:
                print("no mail waiting", file=sys.stderr)
            return EXIT_NO_MAIL  # a script tells "nothing came" from mail by the status


def _show(claims: list[dict[str, Any]], args: argparse.Namespace, view: str) -> None:
    """Writes the claims (before any is acknowledged: a crash here means redelivery)."""
    for claim in claims:
        token = claim["token"] if args.no_ack else None
        if view == "json":
            shown = {"message": claim["message"]}
            if token is not None:
                shown["token"] = token
            sys.stdout.write(json_text(shown) + "\n")
        elif view == PERSON:
            sys.stdout.write(person_view(claim["message"], token=token) + "\n\n")
        else:
            if token is not None:
                sys.stdout.write(f"token: {token}\n")
            sys.stdout.write(for_terminal(claim["envelope"]) + "\n\n")
    sys.stdout.flush()


def cmd_ack(args: argparse.Namespace) -> int:
    result = Me().call("POST", "/ack", {"tokens": args.tokens})
    if args.json:
        print_json(result)
    else:
        for token in result["applied"]:
            print(f"acknowledged {one_line(token)}")
        for item in result["not_applied"]:
            from pager.domain.hints import Edge, not_applied_text

            why = not_applied_text(str(item["reason"]), Edge.CLI)
            print(f"not applied {one_line(item['token'])}: {one_line(why)}")
    return EXIT_OK if not result["not_applied"] else 1


def cmd_alias(args: argparse.Namespace) -> int:
    renamed = Me().call("POST", "/alias", {"alias": args.name, "force": args.force})
    if args.json:
        print_json(renamed)
    else:
        print(f"you are now {one_line(renamed['address'])} ({one_line(renamed['agent_id'])})")
    return EXIT_OK


def cmd_claim(args: argparse.Namespace) -> int:
    taken = Me().call("POST", "/claim-identity", {"name": args.name, "force": args.force})
    if args.json:
        print_json(taken)
    else:
        who = f"{one_line(taken['address'])} ({one_line(taken['agent_id'])})"
        print(f"you are now {who}, with its inbox and history")
    return EXIT_OK


def cmd_whoami(args: argparse.Namespace) -> int:
    me = Me()
    who = me.call("GET", "")
    who["why"] = me.why
    if args.json:
        print_json(who)
        return EXIT_OK
    shown = {key: one_line(who[key]) for key in ("address", "agent_id", "implementation")}
    print(f"{shown['address']}  ({shown['agent_id']}, {shown['implementation']})")
    print(f"acting as {one_line(me.why)}")
    print(f"workspace {one_line(who['workspace'])} on {one_line(who['host'])}")
    return EXIT_OK


#: Agents per roster request of `pager who` (the most the broker gives in one page).
WHO_PAGE = 500


def cmd_who(args: argparse.Namespace) -> int:
    from urllib.parse import urlencode

    me = Me()
    query = {"scope": "all" if args.all else "workspace", "limit": str(WHO_PAGE)}
    roster = me.call("GET", f"/roster?{urlencode(query)}")
    agents = roster["agents"]
    while roster.get("next_cursor"):  # every page, so the listing is the whole roster
        roster = me.call("GET", f"/roster?{urlencode({**query, 'cursor': roster['next_cursor']})}")
        agents += roster["agents"]
    roster = {"scope": roster["scope"], "agents": agents}
    if args.json:
        print_json(roster)
        return EXIT_OK
    now = time.time()
    rows = [
        [
            a["address"] + (" (you)" if a["you"] else ""),
            a["implementation"],
            # A broker that stopped beating in a shared store (SPEC §13): its sessions wait.
            a["host"] + ("" if a.get("host_alive", True) else " (down)"),
            "yes" if a["attached"] else "no",
            ago(a["last_seen"], now),
            str(a["waiting"]),
        ]
        for a in roster["agents"]
    ]
    print(table(["ADDRESS", "IMPLEMENTATION", "HOST", "ATTACHED", "LAST SEEN", "WAITING"], rows))
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    from urllib.parse import urlencode

    query = {"limit": args.limit}
    if args.with_ is not None:
        query["with"] = args.with_
    if args.thread is not None:
        query["thread"] = args.thread
    if args.full:
        query["full"] = "true"
    me = Me()
    history = me.call("GET", f"/history?{urlencode(query)}")
    if args.json:
        print_json(history)
        return EXIT_OK
    if args.full:  # each message whole, oldest first
        person = _view(me, args) == PERSON
        for message in reversed(history["messages"]):
            shown = person_view(message) if person else for_terminal(message["envelope"])
            sys.stdout.write(shown + "\n\n")
        return EXIT_OK
    now = time.time()
    rows = [
        [
            ago(m["sent_at"], now),
            f"from {m['from']}" if m["direction"] == "received" else f"to {m['to']}",
            m["state"],
            first_line(m["body"]),
        ]
        for m in reversed(history["messages"])  # oldest first, as a conversation reads
    ]
    print(table(["WHEN", "WHO", "STATE", "FIRST LINE"], rows) if rows else "no messages")
    return EXIT_OK


def cmd_sent(args: argparse.Namespace) -> int:
    me = Me()
    if args.message_id is not None:
        status = me.call("GET", f"/sent/{args.message_id}")
        if args.json:
            print_json(status)
        else:
            dead = f" ({status['dead_reason']})" if status.get("dead_reason") else ""
            line = (f"{status['message_id']} to {status['to']}: {status['state']}{dead},"
                    f" attempts {status['attempts']}, sent {ago(status['sent_at'])}")  # fmt: skip
            print(one_line(line))
        return EXIT_OK
    sent = me.call("GET", f"/sent?limit={args.limit}")
    if args.json:
        print_json(sent)
        return EXIT_OK
    now = time.time()
    rows = [
        [m["id"], m["to"], ago(m["sent_at"], now), m["state"], first_line(m["body"], 40)]
        for m in sent["messages"]
    ]
    print(table(["ID", "TO", "SENT", "STATE", "FIRST LINE"], rows) if rows else "nothing sent")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """The parsers of these commands, for `pager`'s argument parser."""
    send = commands.add_parser(
        "send",
        description="Send BODY to TO (an alias, alias@workspace-slug, or an agent id). BODY `-`,"
        " or none with standard input not a terminal, reads it from standard input. Prints the"
        " message id, the recipient's address and whether its session was told.",
        epilog="example: pager send api 'the schema changed, see #12'",
    )
    send.add_argument("to", metavar="TO")
    send.add_argument("body", metavar="BODY", nargs="?")
    send.add_argument("--thread", help="the thread this message belongs to")
    send.add_argument("--reply-to", metavar="MSG", help="the id of the message this answers")
    send.add_argument("--key", help="idempotency key: a resend with it returns the original")
    _json(send)
    inbox = commands.add_parser(
        "inbox",
        description="Your waiting mail, oldest first: id, sender, age, thread, first line. "
        "Nothing is claimed; `pager read` reads it.",
    )
    inbox.add_argument("-n", dest="limit", type=int, default=50, help="at most N (default 50)")
    inbox.add_argument(
        "--all", action="store_true", help="every inbox with mail waiting: INBOX WAITING ATTACHED"
    )
    _view_option(inbox)
    _json(inbox)
    read = commands.add_parser(
        "read",
        description="Claim up to N waiting messages (default 10), print each whole, and"
        " acknowledge them once written: for the person at a terminal, a header (from, when,"
        " thread, reply to, id) and the body; for an agent (inside a session, or output not"
        " a terminal), inside Pager's envelope. Exit status 0 when it read"
        f" mail, {EXIT_NO_MAIL} when none came (none waited, or none within --wait).",
        epilog="example: pager read --wait 30",
    )
    read.add_argument("count", metavar="N", nargs="?", type=_how_many, default=10)
    read.add_argument("--wait", type=_seconds, default=0.0, metavar="S",
                      help="wait up to S seconds for the first message")  # fmt: skip
    read.add_argument("--follow", action="store_true", help="keep reading until interrupted")
    read.add_argument("--no-ack", action="store_true",
                      help="print the claim tokens instead of acknowledging")  # fmt: skip
    _view_option(read)
    _json(read, lines=True)
    ack = commands.add_parser(
        "ack",
        description="Acknowledge claims (from `pager read --no-ack`); prints each token applied"
        " and each not applied with the reason. Exit 1 when any was not applied.",
    )
    ack.add_argument("tokens", metavar="TOKEN", nargs="+")
    _json(ack)
    alias = commands.add_parser(
        "alias",
        description="Rename the identity this command acts as (the update_agent_alias tool)."
        " Your old name stays reserved for you; mail to it is refused with your new address.",
    )
    alias.add_argument("name", metavar="NAME")
    alias.add_argument(
        "--force", action="store_true", help="take NAME from the agent holding it (it is ended)"
    )
    _json(alias)
    claim = commands.add_parser(
        "claim",
        description="Become the identity named NAME in this workspace (its id, inbox and"
        " history): allowed when its holder detached, lapsed or was archived; with --force also"
        " while it is attached (that session is told and ended). Run it inside a session.",
    )
    claim.add_argument("name", metavar="NAME")
    claim.add_argument("--force", action="store_true", help="also while NAME is attached")
    _json(claim)
    whoami = commands.add_parser(
        "whoami",
        description="The identity this command acts as (docs/cli.md), its address and workspace.",
    )
    _json(whoami)
    who = commands.add_parser(
        "who",
        description="Everyone reachable in this workspace (or every workspace with --all).",
    )
    who.add_argument("--all", action="store_true", help="every workspace")
    _json(who)
    history = commands.add_parser(
        "history",
        description="Your past messages, oldest first; nothing is claimed or acknowledged.",
    )
    history.add_argument("--with", dest="with_", metavar="X", help="only those with X")
    history.add_argument("--thread", metavar="T", help="only thread T")
    history.add_argument("-n", dest="limit", type=int, default=20, help="the last N (default 20)")
    history.add_argument("--full", action="store_true", help="print each message whole")
    _view_option(history)
    _json(history)
    sent = commands.add_parser(
        "sent",
        description="Your recent sends with their delivery state, newest first; with a"
        " message id, that message's whole state (attempts, why it died).",
    )
    sent.add_argument("message_id", metavar="MSG_ID", nargs="?")
    sent.add_argument("-n", dest="limit", type=int, default=20, help="the last N (default 20)")
    _json(sent)


def _seconds(text: str) -> float:
    """`--wait`'s value: a finite number of seconds, 0 or more."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds; give 0 or more, such as --wait 30"
        )
    return value


def _how_many(text: str) -> int:
    """`read`'s N: a whole number, 1 or more."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of messages; give 1 or more, such as `pager read 5`"
        )
    return value


def _view_option(parser: Any) -> None:
    parser.add_argument(
        "--view",
        choices=(PERSON, AGENT),
        help="person: a header and the body; agent: Pager's envelope for a model (default:"
        " person for you at a terminal, agent inside a session or when output is not a terminal)",
    )


def _json(parser: Any, *, lines: bool = False) -> None:
    what = "one JSON object per line" if lines else "JSON"
    parser.add_argument("--json", action="store_true", help=f"print {what} for scripts")


#: `send`'s options that take a value, by their attribute (the parser's `dest`).
SEND_VALUES = {"--thread": "thread", "--reply-to": "reply_to", "--key": "key"}


def quick_send_args(argv: list[str]) -> Any:
    """`pager send`'s arguments read by hand, as argparse would read them, for the plainest
    command lines (TO, BODY and these options spelt out): importing argparse and building
    the parser is a tenth of a script's send. None for anything else (help, an error, an
    abbreviation, `--`, a value that starts with `-`): argparse then reads it, and speaks."""
    args: Any = _Arguments(command="send", version=False, to=None, body=None, json=False)
    for dest in SEND_VALUES.values():
        setattr(args, dest, None)
    positionals: list[str] = []
    ended = False  # argparse takes TO and BODY only as one run: `TO --json BODY` is an error
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "-" or not word.startswith("-"):
            if ended and positionals:
                return None
            positionals.append(word)
        elif word == "--json":
            args.json = True
            ended = bool(positionals)
        else:
            name, eq, value = word.partition("=")
            if name not in SEND_VALUES:
                return None
            if not eq:
                i += 1
                if i == len(argv) or argv[i].startswith("-"):
                    return None
                value = argv[i]
            setattr(args, SEND_VALUES[name], value)
            ended = bool(positionals)
        i += 1
    if not 1 <= len(positionals) <= 2:
        return None
    args.to = positionals[0]
    args.body = positionals[1] if len(positionals) == 2 else None
    return args


class _Arguments:
    """What argparse's Namespace holds, for `quick_send_args` (`types.SimpleNamespace` would
    cost a send the import of `types`)."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


#: The commands whose plainest command lines are read without argparse.
QUICK_PARSERS = {"send": quick_send_args}

HANDLERS = {
    "send": cmd_send,
    "inbox": cmd_inbox,
    "read": cmd_read,
    "ack": cmd_ack,
    "whoami": cmd_whoami,
    "alias": cmd_alias,
    "claim": cmd_claim,
    "who": cmd_who,
    "history": cmd_history,
    "sent": cmd_sent,
}
