"""A job id's rule (SPEC §8.2: `job_id` names a page's thread). One rule for the broker's page
parser and for `pager run`, which checks `--job-id` before the job runs rather than after.
Standard library only: `pager run` imports it on its fast path."""

from __future__ import annotations

import re

JOB_ID_MAX = 200  # a thread name's bound
#: No control characters or line breaks: a job id is shown on the header line.
JOB_ID_PATTERN = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]*$"
#: What a bad one is told.
JOB_ID_RULE = (
    f"1-{JOB_ID_MAX} characters without control characters or line breaks (it names the thread)"
)


def is_job_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= JOB_ID_MAX
        and re.fullmatch(JOB_ID_PATTERN, value) is not None
    )
