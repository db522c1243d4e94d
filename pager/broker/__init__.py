"""The broker's composition root: its supervision tree (`tree.py`), built on the generic
`supervisors` library and the `actors` runtime (ARCHITECTURE.md, Supervisors)."""

from pager.broker.tree import BrokerContext, broker_context, build_broker_tree

__all__ = ["BrokerContext", "broker_context", "build_broker_tree"]
