"""The lease rule an identity actor holds (pager/domain/lease.py): pure, no clock of its own."""

from __future__ import annotations

from pager.domain.lease import Lease

TTL = 90.0


def test_renewal_moves_the_lease_later_never_earlier_and_records_it_now_and_then() -> None:
    lease = Lease.fresh(now=0.0, ttl=TTL, persisted=90.0)
    assert lease.renew(until=40.0, ttl=TTL) is None  # earlier than it runs: unchanged
    assert lease.deadline == 90.0
    assert lease.renew(until=120.0, ttl=TTL) is None  # within half a lease of the store's
    assert lease.renew(until=136.0, ttl=TTL) == 136.0  # past it: the store records it
    assert lease.persisted == 136.0
    assert not lease.lapsed(135.0)
    assert lease.lapsed(136.0)


def test_open_streams_hold_the_lease_and_the_last_close_leaves_the_grace() -> None:
    lease = Lease.fresh(now=0.0, ttl=TTL, persisted=90.0)
    first, second = object(), object()
    lease.stream_opened(first)
    lease.stream_opened(second)
    lease.stream_opened(first)  # said again (a heartbeat): still one stream
    assert not lease.lapsed(1000.0)
    assert lease.stream_closed(first, now=1000.0, grace=15.0)
    assert not lease.lapsed(2000.0)  # the other still holds it
    assert lease.stream_closed(second, now=2000.0, grace=15.0)
    assert not lease.stream_closed(second, now=2000.0, grace=15.0)  # unknown here: nothing
    assert not lease.lapsed(2014.0)
    assert lease.lapsed(2015.0)
