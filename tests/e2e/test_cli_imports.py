"""What `pager send` loads, against a live broker: the everyday family and the shared modules
of the command line, and none of the others, the TUI, the installers or the server (a set from
`python -X importtime`, never a time). tests/test_cli_layering.py covers the commands that
need no broker."""

from __future__ import annotations

import json

from tests.e2e.conftest import Broker
from tests.e2e.test_everyday_cli import pager
from tests.test_cli_layering import family, heavy, loaded


def test_send_loads_the_everyday_family_alone(broker: Broker) -> None:
    me = pager(broker, broker.workspace, "whoami", "--json")
    assert me.returncode == 0, me.stderr
    alias = json.loads(me.stdout)["alias"]
    names = loaded(["send", alias, "hi"], broker.home.env, broker.workspace)
    assert heavy(names) == set()
    assert "pager.commands.everyday" in names  # it ran
    assert {family(name) for name in names} - {None} == {"common", "acting", "show", "everyday"}
    assert "pager.implementations" not in names  # a recipient with no session: no manifests
    history = pager(broker, broker.workspace, "history", "--json")
    assert [m["body"] for m in json.loads(history.stdout)["messages"]] == ["hi"]  # sent, to oneself
