"""The live sessions of one broker: each attached session's binding to its identity, its lease
and its open event streams, indexed by token, session id and identity.

Each `Binding` belongs to its identity actor (ARCHITECTURE.md, Ownership): only that actor
binds it, ends it and runs its lease timer. The index lets authentication be a lookup, not a
mailbox hop: a request finds its binding by token and moves its lease later in place (a field
write on the event loop), and the identity actor alone decides, when its timer fires, that the
lease lapsed. Nothing here touches the store.
"""

from __future__ import annotations

import attrs
import trio

from pager.domain.records import Session


@attrs.define(eq=False)
class Binding:
    """An attached session as its identity actor holds it."""

    session: Session
    implementation: str
    lease_deadline: float  # wall clock
    persisted_lease: float  # the lease the store last recorded
    streams: int = 0  # open event streams hold the lease
    ended: trio.Event = attrs.field(factory=trio.Event)  # event streams wait on it
    # Sessions this attachment carried on from (a takeover by alias): streams opened under
    # those ids still count towards this lease.
    former: list[str] = attrs.field(factory=list)

    @property
    def identity_id(self) -> str:
        return self.session.identity_id

    def lapsed(self, now: float) -> bool:
        return self.streams == 0 and now >= self.lease_deadline


class SessionIndex:
    """Bindings by token hash, by session id (current or former) and by identity."""

    def __init__(self) -> None:
        self._by_token: dict[str, Binding] = {}
        self._by_session: dict[str, Binding] = {}
        self._by_identity: dict[str, Binding] = {}

    def by_token(self, token_hash: str) -> Binding | None:
        return self._by_token.get(token_hash)

    def by_session(self, session_id: str) -> Binding | None:
        return self._by_session.get(session_id)

    def of_identity(self, identity_id: str) -> Binding | None:
        return self._by_identity.get(identity_id)

    def attached_ids(self) -> frozenset[str]:
        return frozenset(self._by_identity)

    def bind(self, binding: Binding) -> None:
        """Index `binding` under its session (its identity actor calls this)."""
        session = binding.session
        self._by_token[session.token_hash] = binding
        self._by_session[session.id] = binding
        self._by_identity[session.identity_id] = binding

    def carry_on(self, binding: Binding, session: Session) -> None:
        """The attachment continues as `session` (same token, another identity: a takeover
        by alias): its open streams keep counting and are not told it ended."""
        old = binding.session
        if self._by_identity.get(old.identity_id) is binding:
            del self._by_identity[old.identity_id]
        binding.former.append(old.id)
        binding.session = session
        binding.persisted_lease = session.lease_expires_at
        self.bind(binding)

    def release(self, binding: Binding, *, ended: bool = True) -> None:
        """Drop `binding` from the index; `ended` tells its streams the session is over."""
        session = binding.session
        if ended:
            binding.ended.set()
        if self._by_token.get(session.token_hash) is binding:
            del self._by_token[session.token_hash]
        for session_id in (session.id, *binding.former):
            if self._by_session.get(session_id) is binding:
                del self._by_session[session_id]
        if self._by_identity.get(session.identity_id) is binding:
            del self._by_identity[session.identity_id]
