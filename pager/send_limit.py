"""`pager send`'s check of the body's size before it sends: a body over the limit is refused
here with the broker's own words, whatever its size, rather than sent (a request over the
broker's request cap would be answered with that cap, not the body's limit).

The configuration is read only for a body over the default limit: the limit may have been
raised (`[limits] body_cap`), and most sends are far below it."""

from __future__ import annotations

from pager.domain.body_limit import BODY_CAP, body_size, oversized_body


def check_body(body: str) -> None:
    """Raise CommandRefused (`oversized_content`) for a body over the limit of this broker's
    configuration."""
    size = body_size(body)
    if size <= BODY_CAP:
        return  # under the default; the broker checks a lowered limit itself
    cap = _configured_cap()
    if size > cap:
        from pager.everyday import CommandRefused

        raise CommandRefused(oversized_body(size, cap), "oversized_content")


def _configured_cap() -> int:
    from pager.cli import CommandError, _paths
    from pager.config import ConfigError, load_config

    try:
        return load_config(_paths().config).limits.body_cap
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
