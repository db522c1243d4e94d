"""The broker's composition root: its context and supervision tree (`tree.py`), the messaging
subtree (`messaging.py`) and the providers' start functions (`providers.py`), built on the
generic `supervisors` library and the `actors` runtime (ARCHITECTURE.md, Supervisors). Each
part is made with all it needs before it starts; nothing is wired in after."""

from pager.broker.tree import BrokerContext, broker_context, build_broker_tree

__all__ = ["BrokerContext", "broker_context", "build_broker_tree"]
