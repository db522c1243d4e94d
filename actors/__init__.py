"""Actors: the runtime (mailboxes, cast/call, replies) and, later, the broker's actors."""

from actors._runtime import (
    Actor,
    ActorCrashed,
    ActorError,
    ActorRef,
    ActorStopped,
    Call,
    CallTimeout,
    MailboxFull,
    Reply,
    run_actor,
    start_actor,
)

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorError",
    "ActorRef",
    "ActorStopped",
    "Call",
    "CallTimeout",
    "MailboxFull",
    "Reply",
    "run_actor",
    "start_actor",
]
