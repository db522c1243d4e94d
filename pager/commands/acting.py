"""Who a command acts as (docs/cli.md): `Me`, the session of the wrapped launch it runs in
(its token, `PAGER_TOKEN_FILE` or `PAGER_TOKEN`), else the person at the terminal in the
current directory's workspace (the local secret and `?workspace=`); or `Operator`, the person
with the local secret over the operator routes."""

from __future__ import annotations

import os

from pager.commands.common import BrokerRefused, CommandError, call_broker, running_broker

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any

    from pager.launch.paths import StatePaths


class Me:
    """The broker, and the credential and query that say who this command acts as."""

    def __init__(self) -> None:
        from pager.launch.files import session_token

        self.paths, broker = running_broker()
        self.url: str = broker.url
        self.connection = broker.connection
        token = session_token(os.environ)
        self.harness: tuple[int, str, str] | None = None
        self.person_query: str | None = None  # the query that acts as the person
        #: The person at the terminal, not a session nor a harness's identity.
        self.acts_as_person = False
        if token is not None:
            self.credential, self.query, self.why = token, "", "the session of this launch"
            return
        from pager.client import quote
        from pager.launch.ancestry import harness_ancestor

        self.credential = local_secret(self.paths)
        self.query = self.person_query = f"workspace={quote(os.getcwd())}"
        self.harness = harness_ancestor(harness_programs())
        if self.harness is not None:
            pid, started, name = self.harness
            self.query += f"&harness={pid}:{quote(started)}"
            self.why = f"the session of {name} (pid {pid}), which this command runs inside"
        else:
            self.why = "the person at this terminal (no Pager session in this environment)"
            self.acts_as_person = True

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """`/v1/me{path}`; the answer, or CommandError with the broker's message and advice."""
        target = f"/v1/me{path}"
        if self.query:
            target += ("&" if "?" in target else "?") + self.query
        try:
            return call_broker(
                self.url,
                method,
                target,
                token=self.credential,
                body=body,
                timeout=timeout,
                connection=self.connection,
            )
        except BrokerRefused as refused:
            raise CommandRefused(self.advice(refused), refused.code, refused.error) from None

    def advice(self, refused: BrokerRefused) -> str:
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

    def __init__(self, message: str, code: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        #: The broker's error as it answered it (its details: a conflict's holders).
        self.error: dict[str, Any] = error or {}


def local_secret(paths: StatePaths) -> str:
    """The local secret, read without `pathlib` (a person's quick commands read it)."""
    from pager.launch.files import read_secret
    from pager.launch.paths import SECRET

    return read_secret(paths.file(SECRET))


def send_page(to: str | None, page: dict[str, Any], *, run: bool = False) -> dict[str, Any]:
    """A page (docs/paging.md) from this command's identity to `to` (None: to itself); `run`:
    it reports a job `pager run` watched (script origin, hop 0). The send's result,
    CommandRefused, or CommandError when no broker answers."""
    result: dict[str, Any] = Me().call("POST", "/notify", {"to": to, "run": run, "page": page})
    return result


def harness_programs() -> frozenset[str]:
    """The programs of the known harnesses: the built-in manifests' `executable` lines. Read
    as plain lines (these files are ours, and `executable = "…"` is a top-level key): importing
    tomllib and re costs these commands ~10 ms, a tenth of their whole run, and pathlib a few
    more."""
    names = set()
    builtin = os.path.join(os.path.dirname(os.path.dirname(__file__)), "implementations", "builtin")
    for manifest in os.listdir(builtin):
        if not manifest.endswith(".toml"):
            continue
        with open(os.path.join(builtin, manifest), encoding="utf-8") as file:
            text = file.read()
        for line in text.splitlines():
            key, eq, value = line.partition("=")
            if eq and key.strip() == "executable":
                name = value.split("#", 1)[0].strip().strip('"')
                if name and "{" not in name:
                    names.add(name)
                break
    return frozenset(names)


class Operator:
    """The broker and the local secret: the person, over the operator routes."""

    def __init__(self) -> None:
        paths, broker = running_broker()
        self.url: str = broker.url
        self.connection = broker.connection
        self.secret = local_secret(paths)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return call_broker(
            self.url, method, path, token=self.secret, body=body, connection=self.connection
        )


def resolve(agents: list[dict[str, Any]], given: str) -> dict[str, Any]:
    """The one agent `given` names (id, address, or alias unique across workspaces)."""
    from pager.domain.addressing import answers_to

    found = [
        a
        for a in agents
        if answers_to(given, agent_id=a["agent_id"], alias=a["alias"], address=a["address"])
    ]
    if not found:
        raise CommandError(f"no agent {given!r}; `pager who --all` lists them")
    if len(found) > 1:
        named = ", ".join(a["address"] for a in found)
        raise CommandError(f"{given!r} names {len(found)} agents ({named}); give the address")
    return found[0]
