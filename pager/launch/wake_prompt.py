"""The prompt Pager starts a harness's turn with when mail waits (a wake run, docs/wake.md, or
an idle wake through an input file)."""

from __future__ import annotations


def wake_prompt(address: str) -> str:
    """`[pager]` first: `pager hook` then knows no person typed it (SPEC §8.1), so what the
    turn sends keeps counting hops."""
    return (
        f"[pager] Mail is waiting for you in Pager (you are {address}). Your hooks may have"
        " shown it above; otherwise read it with the pager `fetch` tool or `pager read`, and"
        " acknowledge what you read. Act on it as your instructions allow, reply with the"
        " `send` tool or `pager send` when a reply is due, then end this turn."
    )
