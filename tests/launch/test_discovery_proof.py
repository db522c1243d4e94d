"""Adoption decided by the kernel's lock and the broker's proof of the secret, never by what a
file or a `/health` answer says (SPEC §5, §12; pager/launch/proof.py, docs/security.md)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pager.client import request_json
from pager.launch.discovery import BrokerLocator, discover
from pager.launch.lock import BrokerLock, holder_alive
from pager.launch.paths import StatePaths
from pager.launch.proof import health_proof, new_challenge, proof_holds, valid_challenge
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for


def test_proof_holds_only_for_the_secret_challenge_and_address() -> None:
    """The proof is bound to the secret, the challenge, the instance and the address."""
    challenge = new_challenge()
    assert valid_challenge(challenge)
    proof = health_proof("s3cret", challenge, "inst", "127.0.0.1:4000")
    assert proof_holds("s3cret", challenge, "inst", "127.0.0.1:4000", proof)
    assert not proof_holds("other", challenge, "inst", "127.0.0.1:4000", proof)
    assert not proof_holds("s3cret", new_challenge(), "inst", "127.0.0.1:4000", proof)
    assert not proof_holds("s3cret", challenge, "inst2", "127.0.0.1:4000", proof)
    assert not proof_holds("s3cret", challenge, "inst", "127.0.0.1:4001", proof)  # relayed
    assert not proof_holds("s3cret", challenge, "inst", "127.0.0.1:4000", None)
    for bad in ("", "zz" * 16, "A" * 32, "ab" * 15, "ab" * 17):
        assert not valid_challenge(bad)


@pytest.mark.parametrize("secret", ["s", "x" * 64, "y" * 65, "ü" * 100])
def test_proof_is_the_standard_hmac_sha256(secret: str) -> None:
    """The proof is plain HMAC-SHA256, whatever the key's length."""
    challenge = new_challenge()
    message = b"\n".join((b"pager /health proof v1", challenge.encode(), b"i", b"127.0.0.1:1"))
    expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    assert health_proof(secret, challenge, "i", "127.0.0.1:1") == expected


def test_lock_with_an_identity_but_no_holder_is_stale(tmp_path: Path) -> None:
    """A SIGKILLed broker leaves its identity in broker.lock: the kernel's lock says stale."""
    path = tmp_path / "broker.lock"
    path.write_text(json.dumps({"instance_id": "x", "pid": os.getpid(), "schema_version": 4}))
    assert not holder_alive(path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('ready', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        assert holder_alive(path)
    finally:
        holder.kill()
        holder.wait(timeout=PROCESS_BOUND)
    assert not holder_alive(path)


def test_lock_is_taken_while_others_probe_it(tmp_path: Path) -> None:
    """A starting broker gets its lock although callers keep probing it meanwhile."""
    path = tmp_path / "broker.lock"
    path.touch()
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            holder_alive(path)

    threads = [threading.Thread(target=probe) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(20):
            BrokerLock.acquire(path).release()
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[PagerHome]:
    home = PagerHome(tmp_path / "home")
    started = home.run("start")
    assert started.returncode == 0, started.stderr
    yield home
    home.kill_all()


def test_health_challenge_is_answered_with_the_proof(running: PagerHome) -> None:
    """The real broker proves itself for its own address; a malformed challenge is refused."""
    paths = StatePaths(running.root)
    found = discover(paths)
    assert found.broker is not None, found.reason
    challenge = new_challenge()
    status, health = request_json(found.broker.url, "GET", f"/health?challenge={challenge}")
    assert status == 200
    address = found.broker.url.removeprefix("http://")
    secret = paths.secret.read_text().strip()
    assert proof_holds(secret, challenge, found.broker.instance_id, address, health["proof"])
    status, refused = request_json(found.broker.url, "GET", "/health?challenge=not-hex")
    assert (status, refused["error"]["code"]) == (400, "validation_failed")


def test_discovery_refuses_a_relay_of_the_real_broker(running: PagerHome) -> None:
    """A program that forwards `/health` (challenge included) to the real broker gets a proof
    for the broker's address, not its own: not adopted, and it is sent no credential."""
    paths = StatePaths(running.root)
    real = discover(paths).broker
    assert real is not None
    real_url = real.url
    seen: list[dict[str, Any]] = []

    class Relay(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            status, answer = request_json(real_url, "GET", self.path)
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    relay = HTTPServer(("127.0.0.1", 0), Relay)
    thread = threading.Thread(target=relay.serve_forever)
    thread.start()
    original = paths.broker_json.read_text()
    try:
        info = json.loads(original)
        info["url"] = f"http://127.0.0.1:{relay.server_address[1]}"
        paths.broker_json.write_text(json.dumps(info))
        found = discover(paths)
        assert found.broker is None
        assert "did not prove that it is this user's broker" in found.reason
        assert seen
        assert all("Authorization" not in headers for headers in seen)
    finally:
        relay.shutdown()
        thread.join()
        paths.broker_json.write_text(original)


def test_locator_follows_the_broker_and_never_a_dead_one(running: PagerHome) -> None:
    """The locator keeps the verified broker while it holds its lock, answers None once it is
    gone, and the restarted broker once that one proves itself."""
    paths = StatePaths(running.root)
    first = discover(paths).broker
    assert first is not None
    locator = BrokerLocator(paths, first)
    assert locator.url() == first.url
    running.kill_all()
    assert locator.url() is None
    assert running.run("start").returncode == 0
    wait_for(lambda: locator.url() is not None, "the restarted broker to be located")
    assert locator.broker is not None
    assert locator.broker.instance_id != first.instance_id


def _register(home: PagerHome, *names: str) -> dict[str, str]:
    """Shell sessions `names` in one workspace; their tokens."""
    paths = StatePaths(home.root)
    found = discover(paths)
    assert found.broker is not None, found.reason
    secret = paths.secret.read_text().strip()
    tokens = {}
    for name in names:
        body = {"workspace": str(home.root), "implementation": "shell", "session_name": name}
        status, answer = request_json(
            found.broker.url, "POST", "/v1/register", token=secret, body=body
        )
        assert status in (200, 201), answer
        tokens[name] = answer["token"]
    return tokens


def test_a_command_proves_the_broker_and_sends_on_one_connection(
    running: PagerHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pager send`'s path: the proof, then the send with the session's token, on the one
    connection the broker proved itself on."""
    from pager import client
    from pager.commands.acting import Me

    tokens = _register(running, "alice", "bob")
    monkeypatch.setenv("PAGER_HOME", str(running.root))
    monkeypatch.setenv("PAGER_TOKEN", tokens["alice"])
    opened: list[tuple[str, int]] = []
    connect = client._connect

    def counting(host: str, port: int, timeout: float) -> Any:
        opened.append((host, port))
        return connect(host, port, timeout)

    monkeypatch.setattr(client, "_connect", counting)
    me = Me()
    sent = me.call("POST", "/send", {"to": "bob", "body": "one connection"})
    assert sent["message_id"].startswith("msg_")
    assert len(opened) == 1
    assert me.connection is not None
    me.connection.close()


def test_a_squatter_gets_no_credential_on_the_kept_connection(running: PagerHome) -> None:
    """A program on broker.json's address that relays `/health` (so its identity matches)
    and keeps connections open, as the real broker does: `pager send` as a session and the
    kept-connection discovery send it nothing but the proof request, and close the
    connection it failed to prove itself on."""
    tokens = _register(running, "alice", "bob")
    paths = StatePaths(running.root)
    real = discover(paths).broker
    assert real is not None
    real_url = real.url
    seen: list[bytes] = []
    ended = threading.Semaphore(0)

    class KeepingRelay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keeps each connection open for the next request

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append(self.requestline.encode() + b"\n" + bytes(self.headers) + body)
            if self.path.startswith("/health"):
                status, answer = request_json(real_url, "GET", self.path)
            else:
                status, answer = 200, {"message_id": "msg_forged", "recipient": {}}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def finish(self) -> None:
            super().finish()
            ended.release()  # the client closed the connection

        def log_message(self, format: str, *args: Any) -> None:
            pass

    relay = ThreadingHTTPServer(("127.0.0.1", 0), KeepingRelay)
    thread = threading.Thread(target=relay.serve_forever)
    thread.start()
    original = paths.broker_json.read_text()
    try:
        info = json.loads(original)
        info["url"] = f"http://127.0.0.1:{relay.server_address[1]}"
        paths.broker_json.write_text(json.dumps(info))
        found = discover(paths, keep_open=True)
        assert found.broker is None
        assert "did not prove" in found.reason
        assert ended.acquire(timeout=PROCESS_BOUND)  # that connection is closed, not kept
        sent = subprocess.run(
            [sys.executable, "-m", "pager", "send", "bob", "secret plans"],
            env={**running.env, "PAGER_TOKEN": tokens["alice"]},
            capture_output=True,
            text=True,
            timeout=PROCESS_BOUND,
            check=False,
        )
        assert sent.returncode == 1  # it tried to start a broker: the lock's holder runs
        assert "broker.lock is held by another process" in sent.stderr
        assert "msg_forged" not in sent.stdout
        assert seen
        for request in seen:
            assert request.startswith(b"GET /health?challenge="), request
            assert b"authorization" not in request.lower()
            assert tokens["alice"].encode() not in request
            assert b"secret plans" not in request
    finally:
        relay.shutdown()
        thread.join()
        relay.server_close()
        paths.broker_json.write_text(original)
