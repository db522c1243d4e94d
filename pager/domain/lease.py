"""A session's lease as its identity actor holds it: the rule of renewals, open streams and
when the store records it. Pure: the actor owns one `Lease` and asks it; nothing else writes it.

- A renewal (a request of the session) moves the deadline to `now + ttl`, never earlier (a
  stream's grace may reach further).
- While a stream of the session is open the lease does not lapse; closing the last one leaves
  `stream_grace` to reconnect.
- The store records the lease now and then, not on every request: when it moved more than half
  a ttl past what the store holds (after a restart the broker grants a fresh lease anyway).
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs


@attrs.define
class Lease:
    deadline: float  # wall clock
    persisted: float  # what the store last recorded
    streams: set[Hashable] = attrs.Factory(set)  # the open streams holding it

    @classmethod
    def fresh(cls, now: float, ttl: float, persisted: float) -> Lease:
        """A lease nobody could renew while it was unbound (a broker start, a restarted
        actor, a takeover carried on): `ttl` from now."""
        return cls(now + ttl, persisted)

    def lapsed(self, now: float) -> bool:
        return not self.streams and now >= self.deadline

    def renew(self, until: float, ttl: float) -> float | None:
        """Move the deadline to `until` if later; the lease to record in the store, if due."""
        self.deadline = max(self.deadline, until)
        if self.deadline - self.persisted > ttl / 2:
            self.persisted = self.deadline
            return self.deadline
        return None

    def stream_opened(self, stream: Hashable) -> None:
        self.streams.add(stream)

    def stream_closed(self, stream: Hashable, now: float, grace: float) -> bool:
        """Whether `stream` held it (a close unknown here changes nothing)."""
        if stream not in self.streams:
            return False
        self.streams.discard(stream)
        self.deadline = max(self.deadline, now + grace)
        return True
