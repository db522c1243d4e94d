"""A light stdlib-only HTTP client for the CLI and hooks (no server stack imported)."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit


class BrokerUnreachable(Exception):
    """No HTTP answer from the broker's address."""


def request_json(
    url: str,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    timeout: float = 2.0,
) -> tuple[int, Any]:
    """One request to the broker at `url`; returns (status, decoded JSON body or None)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise BrokerUnreachable(f"{url!r} is not a broker address (http://HOST:PORT)")
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        raw = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise BrokerUnreachable(f"{url}: {exc}") from exc
    finally:
        connection.close()
    try:
        return response.status, json.loads(raw) if raw else None
    except ValueError:
        return response.status, None
