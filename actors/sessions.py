"""The live sessions of one broker as authentication reads them: each attached session's
`Attachment` (an immutable snapshot: token → identity, session, epoch), indexed by token,
session id (current or former) and identity.

Each identity actor owns its session binding (ARCHITECTURE.md, Ownership): the lease, its
timer and the open streams are the actor's own state (`pager/domain/lease.py`); only that
actor publishes, replaces and releases its attachment here, always whole. Authentication is
a lookup in this index, not a mailbox hop, and writes nothing: it casts the renewal to the
actor, which alone decides whether the session is still current. The index outlives one
incarnation of an actor so that the next one (after a crash) carries on the same attachment,
its open streams not told it ended; nothing else survives in it. Nothing here touches the
store.
"""

from __future__ import annotations

import attrs
import trio

from pager.domain.records import Session


class MailBell:
    """Rung by the identity's actor when mail waits for an attached session that nobody
    waits for (no long poll, no delivery address): its event streams say `mail`, so that a
    launch can nudge an idle harness (docs/protocol.md). Rings are counted, so a stream
    misses none between two waits."""

    def __init__(self) -> None:
        self.rung = 0
        self._event = trio.Event()

    def ring(self) -> None:
        self.rung += 1
        self._event.set()
        self._event = trio.Event()

    async def wait_past(self, seen: int) -> None:
        """Return once the bell rang more than `seen` times."""
        while self.rung <= seen:
            await self._event.wait()


@attrs.frozen(eq=False)
class Attachment:
    """An attached session as requests see it: replaced whole when its actor rebinds."""

    session: Session
    implementation: str
    ended: trio.Event  # set (by the owning actor) when the session ends; streams wait on it
    # Sessions this attachment carried on from (a takeover by alias): streams opened under
    # those ids still reach it.
    former: tuple[str, ...] = ()
    # Carried on with `ended` when the attachment is replaced, as its streams hold it.
    bell: MailBell = attrs.field(factory=MailBell)

    @property
    def identity_id(self) -> str:
        return self.session.identity_id


class SessionIndex:
    """Attachments by token hash, by session id (current or former) and by identity."""

    def __init__(self) -> None:
        self._by_token: dict[str, Attachment] = {}
        self._by_session: dict[str, Attachment] = {}
        self._by_identity: dict[str, Attachment] = {}

    def by_token(self, token_hash: str) -> Attachment | None:
        return self._by_token.get(token_hash)

    def by_session(self, session_id: str) -> Attachment | None:
        return self._by_session.get(session_id)

    def of_identity(self, identity_id: str) -> Attachment | None:
        return self._by_identity.get(identity_id)

    def attached_ids(self) -> frozenset[str]:
        return frozenset(self._by_identity)

    def publish(self, attachment: Attachment, *, replacing: Attachment | None = None) -> None:
        """Index `attachment` (its identity actor calls this), in place of `replacing` (the
        same token carried on: a takeover by alias, or a rebind of the same session)."""
        if replacing is not None:
            self._drop(replacing)
        session = attachment.session
        self._by_token[session.token_hash] = attachment
        for session_id in (session.id, *attachment.former):
            self._by_session[session_id] = attachment
        self._by_identity[session.identity_id] = attachment

    def release(self, attachment: Attachment, *, ended: bool = True) -> None:
        """Drop `attachment` from the index; `ended` tells its streams the session is over."""
        if ended:
            attachment.ended.set()
        self._drop(attachment)

    def current(self, attachment: Attachment) -> bool:
        """Whether `attachment` is still what its token stands for (not carried on)."""
        return self._by_token.get(attachment.session.token_hash) is attachment

    def _drop(self, attachment: Attachment) -> None:
        session = attachment.session
        if self._by_token.get(session.token_hash) is attachment:
            del self._by_token[session.token_hash]
        for session_id in (session.id, *attachment.former):
            if self._by_session.get(session_id) is attachment:
                del self._by_session[session_id]
        if self._by_identity.get(session.identity_id) is attachment:
            del self._by_identity[session.identity_id]
