"""What every command shares: the exit statuses, the errors a command reports, the state
directory and the running broker, and one JSON request to it."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any

    from pager.client import Connection
    from pager.launch.discovery import RunningBroker
    from pager.launch.paths import StatePaths

#: The exit statuses (docs/cli.md lists them): 3 is `pager status`'s "no broker runs", 4 is
#: `pager read`'s "no mail came".
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_NO_MAIL = 0, 1, 2, 3, 4


class CommandError(Exception):
    """A failure reported as one line on stderr with exit status 1."""


class UsageError(CommandError):
    """The command line itself is wrong (a misspelt command): one line, exit status 2."""


def add_site_packages() -> None:
    """Under `python -S` (scripts/pager's quick start), what `site` would have done: the
    installed packages and their entry points, for a command that needs them."""
    if sys.flags.no_site and "site" not in sys.modules:  # not yet: under -S only this imports it
        import site

        site.main()


def print_error(exc: Exception) -> None:
    """A command's error on stderr; it may quote what others sent, so shown escaped."""
    from pager.domain.display import for_terminal

    print(f"pager: {for_terminal(str(exc))}", file=sys.stderr)


def state_paths() -> StatePaths:
    """This user's state directory, or CommandError saying why there is none."""
    from pager.launch.paths import StateDirError
    from pager.launch.paths import state_paths as find

    try:
        return find()
    except StateDirError as exc:
        raise CommandError(str(exc)) from None


def ensure_running() -> tuple[StatePaths, RunningBroker]:
    """The state directory and the running broker, started (after the configuration is
    checked) when none runs."""
    from pager.config import ConfigError, load_config
    from pager.launch.lifecycle import LifecycleError, ensure_broker
    from pager.launch.paths import StateDirError, ensure_state_dir

    paths = state_paths()
    try:
        ensure_state_dir(paths)
        load_config(paths.config)  # a bad value fails here, before a broker is spawned
        return paths, ensure_broker(paths)
    except (ConfigError, LifecycleError, StateDirError) as exc:
        raise CommandError(str(exc)) from None


def running_broker() -> tuple[StatePaths, RunningBroker]:
    """The state directory and the running broker, started when none runs. A broker found
    running keeps the connection it proved itself on (`RunningBroker.connection`): the
    command's first request goes on it."""
    from pager.launch.discovery import discover

    paths = state_paths()
    found = discover(paths, keep_open=True)
    if found.broker is not None:
        return paths, found.broker
    return ensure_running()  # slower: it reads the configuration first


class BrokerRefused(CommandError):
    """The broker answered a command with an error."""

    def __init__(self, status: int, answer: Any) -> None:
        error = answer.get("error") if isinstance(answer, dict) else None
        self.error: dict[str, Any] = error if isinstance(error, dict) else {}
        self.code = str(self.error.get("code", ""))
        from pager.domain.hints import Edge, for_edge  # only when refused: ~1 ms of imports

        message = for_edge(self.error, Edge.CLI)  # the hint in the command line's words
        super().__init__(message or f"the broker answered HTTP {status}")


def call_broker(
    url: str,
    method: str,
    path: str,
    *,
    token: str,
    body: Any = None,
    timeout: float = 30.0,
    connection: Connection | None = None,
) -> Any:
    """One JSON request of a command; its answer, BrokerRefused, or CommandError when the
    broker does not answer. `connection`: the one the broker at `url` proved itself on
    (`RunningBroker.connection`), used while it stays open."""
    from pager.client import BrokerUnreachable, request_json

    try:
        if connection is not None and connection.url == url:
            status, answer = connection.request(
                method, path, token=token, body=body, timeout=timeout
            )
        else:
            status, answer = request_json(
                url, method, path, token=token, body=body, timeout=timeout
            )
    except BrokerUnreachable as exc:
        raise CommandError(f"the broker did not answer ({exc}); see `pager status`") from None
    if status >= 400 or not isinstance(answer, dict):
        raise BrokerRefused(status, answer)
    return answer
