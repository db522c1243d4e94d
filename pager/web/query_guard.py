"""Query strings: a route takes only the query parameters it declares, each at most once.

`query(allowed)` is the one check: the routes that read their parameters call it with theirs,
and `refuse_undeclared` runs it before every request to a route the OpenAPI document
describes, with the parameters the document declares for it (pager/web/openapi.py). So a
stray `?x=` is refused with 400 `validation_failed` naming it on every route, a POST that
takes a JSON body as much as a GET, instead of being ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from quart import request

from pager.domain.errors import ErrorCode, PagerError


def invalid(parameter: str, message: str) -> PagerError:
    return PagerError(ErrorCode.VALIDATION_FAILED, message, parameter=parameter)


def query(allowed: tuple[str, ...]) -> dict[str, str]:
    """The request's query parameters, each at most once and each one of `allowed`."""
    found: dict[str, str] = {}
    for name, values in request.args.lists():
        if name not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise invalid(name, f"unknown query parameter {name!r}; this route takes: {known}")
        if len(values) > 1:
            raise invalid(name, f"query parameter {name!r} is given more than once")
        found[name] = values[0]
    return found


#: `{name}` in an OpenAPI path, `<name>` in the Quart rule that serves it.
_TEMPLATED = re.compile(r"\{(\w+)\}")


def refuse_undeclared(
    declared: Mapping[tuple[str, str], tuple[str, ...]],
) -> Callable[[], None]:
    """A check for before each request: `declared` maps (OpenAPI path, method) to the query
    parameters the route takes; a route it does not name is left to itself."""
    by_rule = {
        (_TEMPLATED.sub(r"<\1>", path), method.upper()): names
        for (path, method), names in declared.items()
    }

    def check() -> None:
        rule = request.url_rule
        if not request.args or rule is None:
            return
        allowed = by_rule.get((rule.rule, request.method))
        if allowed is not None:
            query(allowed)

    return check
