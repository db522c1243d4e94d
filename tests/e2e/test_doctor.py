"""`pager doctor` against a real running broker: the broker and its store pass."""

from __future__ import annotations

import json

from tests.e2e.conftest import Broker


def test_doctor_passes_the_broker_and_its_store(broker: Broker) -> None:
    result = broker.home.run("doctor", "--json")
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["broker"]["ok"] is True, checks["broker"]
    assert checks["broker"]["detail"].startswith(f"running at {broker.url} (pid ")
    store = checks["store"]
    assert store["ok"] is True, store
    assert "schema version" in store["detail"]
    assert store["fix"] == ""
