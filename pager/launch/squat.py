"""When the kept port is held by another program at start (SPEC §12; docs/security.md).

The broker keeps its port across restarts so that URLs handed out stay valid. If, at start,
another program listens on that port, whoever it is may have been sent session tokens by
clients that still had the old URL (a harness's MCP client configured with a fixed URL keeps
using it). So the broker says so loudly, listens elsewhere, and revokes every session token
issued before: a revoked token answers `expired`, its holder rejoins through the local secret
(which only this user can read), and a token that reached the squatter is useless.
"""

from __future__ import annotations

import pwd
from pathlib import Path

#: What a token revoked at such a start answers (the store's `revoke_sessions` ends them).
REVOKED_REASON = "revoked: the broker's port was held by another program at start"


def port_owner(port: int, proc: Path = Path("/proc/net")) -> str | None:
    """The user listening on loopback TCP `port`, where the OS tells (Linux's /proc/net)."""
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != "0A":  # 0A: LISTEN
                continue
            if int(fields[1].rpartition(":")[2], 16) != port:
                continue
            uid = int(fields[7])
            try:
                return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
            except KeyError:
                return f"uid {uid}"
    return None


def squat_warning(host: str, port: int, owner: str | None) -> str:
    who = f"by {owner}" if owner else "by another program (the OS does not say whose)"
    return (
        f"the kept port {host}:{port} is held {who}; this broker listens on another port and"
        " revoked every earlier session token, since clients that still had the old address"
        " may have sent theirs there. Restart harnesses started with a fixed MCP URL, and find"
        f" the program with `ss -ltnp 'sport = :{port}'` or `lsof -iTCP:{port}`."
    )
