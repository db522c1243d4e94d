"""The everyday commands of SPEC §4.1 (`send`, `inbox`, `read`, `ack`, `whoami`, `who`,
`history`, `sent`): thin clients of `/v1/me/…`, which runs every rule.

Stdlib-only, like `pager status` and the hook: a script or an agent's shell tool runs these
often. Who a command acts as (SPEC §4.2): the session of the wrapped launch it runs in (its
token, `PAGER_TOKEN_FILE` or `PAGER_TOKEN`), else the person at the terminal in the current
directory's workspace (the local secret and `?workspace=`).
"""

from __future__ import annotations

import json
import os
import sys
import time

from pager.cli import EXIT_NO_MAIL, EXIT_OK, CommandError
from pager.domain.display import for_terminal, json_for_terminal

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


class Me:
    """The broker, and the credential and query that say who this command acts as."""

    def __init__(self) -> None:
        from pager.launch.files import session_token

        self.paths, broker = running_broker()
        self.url: str = broker.url
        token = session_token(os.environ)
        self.harness: tuple[int, str, str] | None = None
        self.person_query: str | None = None  # the query that acts as the person
        if token is not None:
            self.credential, self.query, self.why = token, "", "the session of this launch"
            return
        from urllib.parse import quote

        from pager.launch.ancestry import harness_ancestor

        self.credential = self.paths.secret.read_text().strip()
        self.query = self.person_query = f"workspace={quote(os.getcwd())}"
        self.harness = harness_ancestor(harness_programs())
        if self.harness is not None:
            pid, started, name = self.harness
            self.query += f"&harness={pid}:{quote(started)}"
            self.why = f"the session of {name} (pid {pid}), which this command runs inside"
        else:
            self.why = "the person at this terminal (no Pager session in this environment)"

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """`/v1/me{path}`; the answer, or CommandError with the broker's message and advice."""
        target = f"/v1/me{path}"
        if self.query:
            target += ("&" if "?" in target else "?") + self.query
        try:
            return call_broker(
                self.url, method, target, token=self.credential, body=body, timeout=timeout
            )
        except BrokerRefused as refused:
            raise CommandRefused(self._advice(refused), refused.code) from None

    def _advice(self, refused: BrokerRefused) -> str:
        """The broker's message, and what to do about it from a command line."""
        code, message = refused.code, str(refused)
        if code in ("hop_limit", "rate_limited"):
            return f"{message} (ask your person before sending more)"
        if self.harness is not None and "harness" in refused.error:
            pid, _, name = self.harness
            return (
                f"this command runs inside {name} (pid {pid}), and Pager knows no session of"
                f" it, so it acts as nobody rather than as you. Start it with `pager {name}`,"
                f" or install its plugin (`pager plugin install {name}`) so its hook binds it;"
                " to act as yourself, run the command outside it"
            )
        if not self.query and code in ("unauthenticated", "expired", "ended"):
            return (
                f"{message}. This command acts as the session whose token is in PAGER_TOKEN"
                " (or PAGER_TOKEN_FILE), and the broker no longer knows it: restart the launch"
                " with `pager <harness>`, or unset PAGER_TOKEN to act as yourself"
            )
        return message


class CommandRefused(CommandError):
    """The broker refused what a command asked (retrying the same request will not help),
    as opposed to a CommandError for a broker that did not answer or could not start."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def send_page(to: str | None, page: dict[str, Any], *, run: bool = False) -> dict[str, Any]:
    """A page (SPEC §8.2) from this command's identity (SPEC §4.2) to `to` (None: to itself);
    `run`: it reports a job `pager run` watched (script origin, hop 0). The send's result,
    CommandRefused, or CommandError when no broker answers."""
    result: dict[str, Any] = Me().call("POST", "/notify", {"to": to, "run": run, "page": page})
    return result


class BrokerRefused(CommandError):
    """The broker answered an everyday or operator command with an error."""

    def __init__(self, status: int, answer: Any) -> None:
        error = answer.get("error") if isinstance(answer, dict) else None
        self.error: dict[str, Any] = error if isinstance(error, dict) else {}
        self.code = str(self.error.get("code", ""))
        super().__init__(self.error.get("message") or f"the broker answered HTTP {status}")


def call_broker(
    url: str, method: str, path: str, *, token: str, body: Any = None, timeout: float = 30.0
) -> Any:
    """One JSON request of a command; its answer, BrokerRefused, or CommandError when the
    broker does not answer."""
    from pager.client import BrokerUnreachable, request_json

    try:
        status, answer = request_json(url, method, path, token=token, body=body, timeout=timeout)
    except BrokerUnreachable as exc:
        raise CommandError(f"the broker did not answer ({exc}); see `pager status`") from None
    if status >= 400 or not isinstance(answer, dict):
        raise BrokerRefused(status, answer)
    return answer


def harness_programs() -> frozenset[str]:
    """The programs of the known harnesses: the built-in manifests' `executable` lines. Read
    as plain lines (these files are ours, and `executable = "…"` is a top-level key): importing
    tomllib and re costs these commands ~10 ms, a tenth of their whole run."""
    from pathlib import Path

    names = set()
    for manifest in (Path(__file__).parent / "implementations" / "builtin").glob("*.toml"):
        for line in manifest.read_text().splitlines():
            key, eq, value = line.partition("=")
            if eq and key.strip() == "executable":
                name = value.split("#", 1)[0].strip().strip('"')
                if name and "{" not in name:
                    names.add(name)
                break
    return frozenset(names)


def running_broker() -> tuple[Any, Any]:
    """The state directory and the running broker, started when none runs."""
    from pager.cli import _ensure_running, _paths
    from pager.launch.discovery import discover

    paths = _paths()
    found = discover(paths)
    if found.broker is not None:
        return paths, found.broker
    started: tuple[Any, Any] = _ensure_running()  # slower: it reads the configuration first
    return started


def _print_json(data: Any) -> None:
    sys.stdout.write(_json_text(data, indent=2) + "\n")


def _json_text(data: Any, indent: int | None = None) -> str:
    """Exact JSON, readable (not ASCII-only), with what would drive a terminal as `\\uXXXX`."""
    return json_for_terminal(json.dumps(data, indent=indent, ensure_ascii=False))


def _one_line(value: object) -> str:
    """A value from the broker (others chose it) on one line of what we print for a person:
    control and format characters shown escaped (`pager.domain.display`)."""
    return for_terminal(str(value), one_line=True)


def _ago(stamp: str | None, now: float | None = None) -> str:
    """`3m ago` from an ISO time (the broker's UTC), `-` when none."""
    if not stamp:
        return "-"
    from datetime import datetime

    try:
        then = datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return stamp
    seconds = max(0, int((now or time.time()) - then))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def _first_line(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Aligned columns; the last one is not padded. Cells are shown one line each, escaped."""
    rows = [[_one_line(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def cmd_send(args: argparse.Namespace) -> int:
    body = args.body
    if body is None or body == "-":
        if body is None and sys.stdin.isatty():
            raise CommandError("give the message: pager send TO BODY (or `-` to read stdin)")
        body = sys.stdin.read()
    request: dict[str, Any] = {"to": args.to, "body": body}
    for key, value in (("thread", args.thread), ("reply_to", args.reply_to),
                       ("idempotency_key", args.key)):  # fmt: skip
        if value is not None:
            request[key] = value
    sent = Me().call("POST", "/send", request)
    if args.json:
        _print_json(sent)
        return EXIT_OK
    again = " (a repeat of an earlier send: nothing new was sent)" if sent.get("duplicate") else ""
    wake = _wake_text(str(sent.get("wake")), sent["recipient"].get("implementation"))
    address = _one_line(sent["recipient"]["address"])
    print(f"sent {_one_line(sent['message_id'])} to {address}{again}; {_one_line(wake)}")
    return EXIT_OK


def _wake_text(wake: str, implementation: object) -> str:
    """What a send's wake outcome means for this recipient: a queued message is seen at the
    next turn only by a harness whose manifest has a capability that shows it mail."""
    if wake == "queued" and isinstance(implementation, str):
        from pager.implementations import UnknownImplementation, discover

        try:  # the manifests are read only here: most sends are not `queued`
            manifest = discover().get(implementation).manifest
        except UnknownImplementation:
            pass  # a person, a bare MCP client: it reads when it takes its next turn
        else:
            if not manifest.sees_mail_at_turns:
                return QUEUED_UNTIL_READ
    return WAKES.get(wake, wake)


def cmd_inbox(args: argparse.Namespace) -> int:
    if args.all:
        return _all_inboxes(args)
    inbox = Me().call("GET", f"/inbox?limit={args.limit}")
    if args.json:
        _print_json(inbox)
        return EXIT_OK
    messages = inbox["messages"]
    if not messages:
        print("no mail waiting")
        return EXIT_OK
    now = time.time()
    rows = [
        [m["id"], m["from"], _ago(m["sent_at"], now), m["thread"] or "-", _first_line(m["body"])]
        for m in messages
    ]
    print(_table(["ID", "FROM", "AGE", "THREAD", "FIRST LINE"], rows))
    more = inbox["waiting"] - len(messages)
    if more > 0:
        print(f"… and {more} more (pager inbox -n {inbox['waiting']})")
    print("read them with `pager read`")
    return EXIT_OK


def _all_inboxes(args: argparse.Namespace) -> int:
    """`inbox --all`: every inbox with mail waiting, as three stable columns (for status bars
    and scripts): its address, how many wait, whether a session is attached."""
    from pager.operator_cli import Operator

    snapshot = Operator().call("GET", "/v1/snapshot")
    rows = [
        (agent["address"], int(agent["inbox"]["queued"]), bool(agent["attached"]))
        for workspace in snapshot["workspaces"]
        for agent in workspace["agents"]
        if agent["inbox"]["queued"] and not agent["archived"]
    ]
    if args.json:
        _print_json([{"inbox": a, "waiting": w, "attached": t} for a, w, t in rows])
        return EXIT_OK
    lines = [[a, str(w), "yes" if t else "no"] for a, w, t in rows]
    print(_table(["INBOX", "WAITING", "ATTACHED"], lines))
    return EXIT_OK


def cmd_read(args: argparse.Namespace) -> int:
    me = Me()
    if not args.follow:
        return _read(me, args)
    attached = _attach_person(me)
    try:
        return _read(me, args)
    finally:
        if attached:
            _detach(me)


def _attach_person(me: Me) -> bool:
    """While `read --follow` runs, the person shows as attached (SPEC §4.2): it reads through
    a session of the person's identity, detached when it ends (or lapsing with its lease when
    it is killed). A second follower in the workspace reads as the person, without one."""
    if me.query != me.person_query:
        return False  # a session or a harness's identity: attached or not by its own launch
    alias = me.call("GET", "")["alias"]
    request = {"workspace": os.getcwd(), "implementation": "human", "session_name": alias}
    try:
        opened = call_broker(me.url, "POST", "/v1/register", token=me.credential, body=request)
    except BrokerRefused as refused:
        if refused.code == "alias_conflict":
            return False  # another `read --follow` holds it
        raise CommandError(me._advice(refused)) from None
    me.credential, me.query = str(opened["token"]), ""
    return True


def _detach(me: Me) -> None:
    from contextlib import suppress

    with suppress(CommandError):  # else its lease lapses instead
        call_broker(me.url, "POST", "/v1/sessions/current/detach", token=me.credential, body={})


def _read(me: Me, args: argparse.Namespace) -> int:
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
        _show(claims, args)
        if not args.no_ack and claims:
            me.call("POST", "/ack", {"tokens": [c["token"] for c in claims]})
        if not args.follow:
            if claims:
                return EXIT_OK
            if not args.json:
                print("no mail waiting", file=sys.stderr)
            return EXIT_NO_MAIL  # a script tells "nothing came" from mail by the status


def _show(claims: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Writes the claims (before any is acknowledged: a crash here means redelivery)."""
    for claim in claims:
        if args.json:
            shown = {"message": claim["message"]}
            if args.no_ack:
                shown["token"] = claim["token"]
            sys.stdout.write(_json_text(shown) + "\n")
        else:
            if args.no_ack:
                sys.stdout.write(f"token: {claim['token']}\n")
            sys.stdout.write(for_terminal(claim["envelope"]) + "\n\n")
    sys.stdout.flush()


def cmd_ack(args: argparse.Namespace) -> int:
    result = Me().call("POST", "/ack", {"tokens": args.tokens})
    if args.json:
        _print_json(result)
    else:
        for token in result["applied"]:
            print(f"acknowledged {_one_line(token)}")
        for item in result["not_applied"]:
            print(f"not applied {_one_line(item['token'])}: {_one_line(item['reason'])}")
    return EXIT_OK if not result["not_applied"] else 1


def cmd_alias(args: argparse.Namespace) -> int:
    renamed = Me().call("POST", "/alias", {"alias": args.name, "force": args.force})
    if args.json:
        _print_json(renamed)
    else:
        print(f"you are now {_one_line(renamed['address'])} ({_one_line(renamed['agent_id'])})")
    return EXIT_OK


def cmd_claim(args: argparse.Namespace) -> int:
    taken = Me().call("POST", "/claim-identity", {"name": args.name, "force": args.force})
    if args.json:
        _print_json(taken)
    else:
        who = f"{_one_line(taken['address'])} ({_one_line(taken['agent_id'])})"
        print(f"you are now {who}, with its inbox and history")
    return EXIT_OK


def cmd_whoami(args: argparse.Namespace) -> int:
    me = Me()
    who = me.call("GET", "")
    who["why"] = me.why
    if args.json:
        _print_json(who)
        return EXIT_OK
    shown = {key: _one_line(who[key]) for key in ("address", "agent_id", "implementation")}
    print(f"{shown['address']}  ({shown['agent_id']}, {shown['implementation']})")
    print(f"acting as {_one_line(me.why)}")
    print(f"workspace {_one_line(who['workspace'])} on {_one_line(who['host'])}")
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
        _print_json(roster)
        return EXIT_OK
    now = time.time()
    rows = [
        [
            a["address"] + (" (you)" if a["you"] else ""),
            a["implementation"],
            # A broker that stopped beating in a shared store (SPEC §13): its sessions wait.
            a["host"] + ("" if a.get("host_alive", True) else " (down)"),
            "yes" if a["attached"] else "no",
            _ago(a["last_seen"], now),
            str(a["waiting"]),
        ]
        for a in roster["agents"]
    ]
    print(_table(["ADDRESS", "IMPLEMENTATION", "HOST", "ATTACHED", "LAST SEEN", "WAITING"], rows))
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
    history = Me().call("GET", f"/history?{urlencode(query)}")
    if args.json:
        _print_json(history)
        return EXIT_OK
    if args.full:  # each message whole, oldest first
        for message in reversed(history["messages"]):
            sys.stdout.write(for_terminal(message["envelope"]) + "\n\n")
        return EXIT_OK
    now = time.time()
    rows = [
        [
            _ago(m["sent_at"], now),
            f"from {m['from']}" if m["direction"] == "received" else f"to {m['to']}",
            m["state"],
            _first_line(m["body"]),
        ]
        for m in reversed(history["messages"])  # oldest first, as a conversation reads
    ]
    print(_table(["WHEN", "WHO", "STATE", "FIRST LINE"], rows) if rows else "no messages")
    return EXIT_OK


def cmd_sent(args: argparse.Namespace) -> int:
    me = Me()
    if args.message_id is not None:
        status = me.call("GET", f"/sent/{args.message_id}")
        if args.json:
            _print_json(status)
        else:
            dead = f" ({status['dead_reason']})" if status.get("dead_reason") else ""
            line = (f"{status['message_id']} to {status['to']}: {status['state']}{dead},"
                    f" attempts {status['attempts']}, sent {_ago(status['sent_at'])}")  # fmt: skip
            print(_one_line(line))
        return EXIT_OK
    sent = me.call("GET", f"/sent?limit={args.limit}")
    if args.json:
        _print_json(sent)
        return EXIT_OK
    now = time.time()
    rows = [
        [m["id"], m["to"], _ago(m["sent_at"], now), m["state"], _first_line(m["body"], 40)]
        for m in sent["messages"]
    ]
    print(_table(["ID", "TO", "SENT", "STATE", "FIRST LINE"], rows) if rows else "nothing sent")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """The parsers of these commands, for `pager`'s argument parser."""
    send = commands.add_parser(
        "send",
        help="send a message: pager send TO [BODY]",
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
        help="your waiting mail, oldest first, without claiming it",
        description="Your waiting mail, oldest first: id, sender, age, thread, first line. "
        "Nothing is claimed; `pager read` reads it.",
    )
    inbox.add_argument("-n", dest="limit", type=int, default=50, help="at most N (default 50)")
    inbox.add_argument(
        "--all", action="store_true", help="every inbox with mail waiting: INBOX WAITING ATTACHED"
    )
    _json(inbox)
    read = commands.add_parser(
        "read",
        help="read waiting mail (claim, print whole, acknowledge)",
        description="Claim up to N waiting messages (default 10), print each whole inside"
        " Pager's envelope, and acknowledge them once written. Exit status 0 when it read"
        f" mail, {EXIT_NO_MAIL} when none came (none waited, or none within --wait).",
        epilog="example: pager read --wait 30",
    )
    read.add_argument("count", metavar="N", nargs="?", type=_how_many, default=10)
    read.add_argument("--wait", type=_seconds, default=0.0, metavar="S",
                      help="wait up to S seconds for the first message")  # fmt: skip
    read.add_argument("--follow", action="store_true", help="keep reading until interrupted")
    read.add_argument("--no-ack", action="store_true",
                      help="print the claim tokens instead of acknowledging")  # fmt: skip
    _json(read, lines=True)
    ack = commands.add_parser(
        "ack",
        help="acknowledge claims: pager ack TOKEN…",
        description="Acknowledge claims (from `pager read --no-ack`); prints each token applied"
        " and each not applied with the reason. Exit 1 when any was not applied.",
    )
    ack.add_argument("tokens", metavar="TOKEN", nargs="+")
    _json(ack)
    alias = commands.add_parser(
        "alias",
        help="rename yourself: pager alias NAME",
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
        help="take over NAME's identity and inbox: pager claim NAME [--force]",
        description="Become the identity named NAME in this workspace (its id, inbox and"
        " history): allowed when its holder detached, lapsed or was archived; with --force also"
        " while it is attached (that session is told and ended). Run it inside a session.",
    )
    claim.add_argument("name", metavar="NAME")
    claim.add_argument("--force", action="store_true", help="also while NAME is attached")
    _json(claim)
    whoami = commands.add_parser(
        "whoami",
        help="which identity commands here act as, and why",
        description="The identity this command acts as (docs/cli.md), its address and workspace.",
    )
    _json(whoami)
    who = commands.add_parser(
        "who",
        help="who you can reach: address, implementation, host, attached, last seen, waiting",
        description="Everyone reachable in this workspace (or every workspace with --all).",
    )
    who.add_argument("--all", action="store_true", help="every workspace")
    _json(who)
    history = commands.add_parser(
        "history",
        help="your past messages (read-only)",
        description="Your past messages, oldest first; nothing is claimed or acknowledged.",
    )
    history.add_argument("--with", dest="with_", metavar="X", help="only those with X")
    history.add_argument("--thread", metavar="T", help="only thread T")
    history.add_argument("-n", dest="limit", type=int, default=20, help="the last N (default 20)")
    history.add_argument("--full", action="store_true", help="print each message whole")
    _json(history)
    sent = commands.add_parser(
        "sent",
        help="your recent sends and their delivery state; with an id, that message's",
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


def _json(parser: Any, *, lines: bool = False) -> None:
    what = "one JSON object per line" if lines else "JSON"
    parser.add_argument("--json", action="store_true", help=f"print {what} for scripts")


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
