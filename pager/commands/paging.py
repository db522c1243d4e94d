"""`pager notify` and `pager token` (SPEC §4.1, §8.2): pages from the command line, and the
mailbox tokens that let a script with nothing but a URL page one identity.

`pager notify TO MESSAGE` acts as SPEC §4.2 says (the session it runs in, else the person) over
`POST /v1/me/notify`; with a mailbox token (`--token`, or `PAGER_NOTIFY_TOKEN`) it needs no
state directory at all and posts `/v1/notify` at `--url` (or `PAGER_URL`, or the local broker).
`pager token …` is the person's, with the local secret. Stdlib-only: scripts run these often.
"""

from __future__ import annotations

import json
import os
import sys
import time

from pager.commands.acting import Operator, send_page
from pager.commands.common import EXIT_OK, CommandError, call_broker, running_broker
from pager.commands.show import ago, table
from pager.domain.display import for_terminal

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any


def page_of(args: argparse.Namespace) -> dict[str, Any]:
    """The SPEC §8.2 page the options describe (the broker checks it)."""
    message = args.message
    if message == "-":
        message = sys.stdin.read()
    page: dict[str, Any] = {"message": message}
    for field in args.fields:
        key, eq, value = field.partition("=")
        if not eq or not key:
            raise CommandError(f"--field {field!r}: write KEY=VALUE, e.g. --field branch=main")
        page[key] = value
    for key, value in (("job_id", args.job_id), ("status", args.status),
                       ("exit_code", args.exit_code)):  # fmt: skip
        if value is not None:
            page[key] = value
    return page


def cmd_notify(args: argparse.Namespace) -> int:
    page = page_of(args)
    token = args.token or os.environ.get("PAGER_NOTIFY_TOKEN")
    if token:
        sent = _notify_with_token(args, token, page)
        address = args.to
    else:
        sent = send_page(args.to, page)
        address = sent["recipient"]["address"]
    if args.json:
        sys.stdout.write(json.dumps(sent, indent=2) + "\n")
    else:
        print(for_terminal(f"paged {address}: {sent['message_id']}", one_line=True))
    return EXIT_OK


def _notify_with_token(args: argparse.Namespace, token: str, page: dict[str, Any]) -> Any:
    from pager.client import quote

    url = args.url or os.environ.get("PAGER_URL")
    connection = None
    if not url:
        broker = running_broker()[1]
        url, connection = broker.url, broker.connection
    target = f"/v1/notify?to={quote(args.to)}"
    return call_broker(url, "POST", target, token=token, body=page, connection=connection)


# -- tokens ----------------------------------------------------------------------------------


def cmd_token(args: argparse.Namespace) -> int:
    if args.token_command == "create":
        return _create(args)
    if args.token_command == "list":
        return _list(args)
    return _revoke(args)


def _create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"to": args.to, "workspace": os.getcwd()}
    if args.label is not None:
        body["label"] = args.label
    if args.expires is not None:
        from pager.config import ConfigError, parse_duration

        try:
            body["expires_s"] = parse_duration(args.expires, source="--expires")
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
    made = Operator().call("POST", "/v1/tokens", body)
    if args.json:
        sys.stdout.write(json.dumps(made, indent=2) + "\n")
        return EXIT_OK
    print(made["token"])  # alone on stdout: TOKEN=$(pager token create api)
    expires = f", until {made['expires_at']}" if made["expires_at"] else ""
    print(
        for_terminal(
            f"pager: mailbox token {made['id']} ({made['label']}) pages {made['mailbox']} only"
            f"{expires}. It is shown this once: keep it as a secret (a CI variable);"
            f" `pager token revoke {made['id']}` ends it.",
            one_line=True,
        ),
        file=sys.stderr,
    )
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    query = "?revoked=true" if args.all else ""
    tokens = Operator().call("GET", f"/v1/tokens{query}")["tokens"]
    if args.json:
        sys.stdout.write(json.dumps(tokens, indent=2) + "\n")
        return EXIT_OK
    if not tokens:
        print("no mailbox tokens; `pager token create TO` makes one")
        return EXIT_OK
    now = time.time()
    rows = [
        [
            t["id"],
            t["label"],
            t["mailbox"],
            ago(t["created_at"], now),
            ago(t["last_used_at"], now),
            "revoked" if t["revoked_at"] else (t["expires_at"] or "never"),
        ]
        for t in tokens
    ]
    print(table(["ID", "LABEL", "MAILBOX", "CREATED", "LAST USED", "EXPIRES"], rows))
    return EXIT_OK


def _revoke(args: argparse.Namespace) -> int:
    operator = Operator()
    known = {t["id"] for t in operator.call("GET", "/v1/tokens?revoked=true")["tokens"]}
    unknown = [token_id for token_id in args.ids if token_id not in known]
    if unknown:  # every id checked before any is revoked
        raise CommandError(
            f"no mailbox token {', '.join(unknown)}; `pager token list --all` shows their ids"
        )
    revoked = [operator.call("DELETE", f"/v1/tokens/{token_id}") for token_id in args.ids]
    if args.json:
        sys.stdout.write(json.dumps(revoked, indent=2) + "\n")
        return EXIT_OK
    for token in revoked:
        said = f"revoked {token['id']} ({token['label']}, for {token['mailbox']})"
        print(for_terminal(said, one_line=True))
    return EXIT_OK


def add_commands(commands: Any) -> None:
    notify = commands.add_parser(
        "notify",
        description="Page TO (an alias, alias@slug, or an agent id) with MESSAGE and fields a"
        " model reads as data (docs/paging.md): from the session this runs in, or from you. With a"
        " mailbox token (--token or PAGER_NOTIFY_TOKEN) it pages the token's identity from any"
        " machine that reaches the broker, with no Pager state (--url or PAGER_URL).",
        epilog="example: pager notify api 'deploy finished' --job-id deploy-7 --status success"
        " --field env=staging",
    )
    notify.add_argument("to", metavar="TO")
    notify.add_argument("message", metavar="MESSAGE", help="the text (`-`: standard input)")
    notify.add_argument("--job-id", help="the job this is about (it becomes the thread)")
    notify.add_argument("--status", help="e.g. success, failure")
    notify.add_argument("--exit-code", type=int, metavar="N")
    notify.add_argument("--field", dest="fields", action="append", default=[],
                        metavar="K=V", help="another field (repeatable)")  # fmt: skip
    notify.add_argument("--token", help="a mailbox token (pmt_…; or PAGER_NOTIFY_TOKEN)")
    notify.add_argument("--url", help="the broker's URL, with --token (or PAGER_URL)")
    notify.add_argument("--json", action="store_true", help="print the result as JSON")

    token = commands.add_parser(
        "token",
        description="Mailbox tokens (docs/paging.md): a token pages one identity (POST /v1/notify)"
        " and can do nothing else. It is shown once, stored hashed, and dies with its identity.",
        epilog="example: pager token create api --label ci --expires 30d",
    )
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create",
        help="make a token for TO and print it (once)",
        description="Make a mailbox token that pages TO (an alias here, alias@slug, or an"
        " agent id) and print it once on stdout.",
        epilog="example: TOKEN=$(pager token create api --label nightly-build --expires 90d)",
    )
    create.add_argument("to", metavar="TO")
    create.add_argument("--label", help="how its pages are signed (default: the token's id)")
    create.add_argument("--expires", metavar="D", help="a lifetime such as 12h, 30d")
    create.add_argument("--json", action="store_true", help="print the token's record as JSON")
    listing = actions.add_parser(
        "list",
        help="the tokens: id, label, mailbox, created, last used, expires (never the token)",
        description="List the mailbox tokens (never the tokens themselves).",
    )
    listing.add_argument("--all", action="store_true", help="revoked ones too")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    revoke = actions.add_parser(
        "revoke",
        help="end tokens by id: pager token revoke ID…",
        description="Revoke mailbox tokens by id (`pager token list` shows them); a page with"
        " a revoked token gets 401.",
    )
    revoke.add_argument("ids", metavar="ID", nargs="+")
    revoke.add_argument("--json", action="store_true", help="print the results as JSON")


HANDLERS: dict[str, Any] = {"notify": cmd_notify, "token": cmd_token}
