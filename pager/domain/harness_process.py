"""How a harness process is named (SPEC §4.2, rule 2): `pid:start time`, as the hook reports it
when it binds a session (`POST /v1/hook/claim`) and as a command its agent runs names it to act
as that session (`/v1/me/…?harness=`). One rule for both edges and the OpenAPI document."""

from __future__ import annotations

import re

from pager.domain.errors import ErrorCode, PagerError

#: Linux: `4242:123456` (clock ticks since boot); macOS: `4242:Mon-Dec-6-13:27:07-2026` (from
#: `ps -o lstart`, whose month and day names follow the locale: any visible characters).
HARNESS_MAX = 64
HARNESS_PATTERN = "^[0-9]+:[^\\x00-\\x20\\x7f]+$"


def check_harness(value: str) -> str:
    """`value`, or `validation_failed` saying what a harness process's name looks like (so a
    name no hook could have bound is refused, not looked up)."""
    if len(value) > HARNESS_MAX or re.fullmatch(HARNESS_PATTERN, value) is None:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"harness must be `pid:start time` (digits, a colon, then visible characters without"
            f" spaces; at most {HARNESS_MAX} characters), as `pager hook` reports it",
            arguments=["harness"],
        )
    return value
