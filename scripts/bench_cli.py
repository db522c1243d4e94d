"""Pager's command line against the fastest CLI peer: hcom (PyPI, pinned), interleaved.

hcom 0.7.31 (a Rust CLI over SQLite) is installed into a venv of its own under .cache/peers/
(once) and run with a throwaway HOME; its two agents are `hcom start --as alice` and `--as bob`.
Pager runs two ways against one broker (`pager start`, a temporary PAGER_HOME): from the
checkout's .venv (an editable install), and installed from its own wheel (`pip wheel --no-deps`
of the checkout) into a second venv under .cache/ (rebuilt when pager/ or pyproject.toml
change). Beside each venv, its bare interpreter: `python -c pass`, `python -I -S -c pass` (no
`site`: a yardstick the load moves less than the others, which the send is also given
against), and `python -c 'import json, http.client'` (what `pager hook` is held to). The checkout
is also run through `scripts/pager`, its quick start (Python without `site`).

Every round runs each command once, in turn (so drift of the machine falls on all alike); the
figures are the medians of `--runs` rounds (15):

- `--version` and `help` (`hcom --help`);
- send from one agent to another (`pager send dave …` acting as alice's session, PAGER_TOKEN;
  `hcom send @dave --name alice -- …`; dave never reads);
- send -> receipt: a reader waits (`pager read 1 --wait 30` as bob; `hcom listen --name bob
  30`), then the send runs; from the send's start to the reader's exit;
- `pager hook` (Claude's UserPromptSubmit, nothing waiting);
- `pager hook --pre-tool` (Claude's PreToolUse before an Edit of a file alice reserved, as bob:
  the reservations check, refused; the manifest's own command line);
- 4 CLI senders: four threads each running send after send for `--seconds` (4): sends/s.

Targets (issue 28): `pager send` <= 4x hcom's send; `pager --version` and `pager help` <= 1.3x
the bare interpreter of the same venv; `pager hook` and `pager hook --pre-tool` <= 1.0x that
interpreter importing json and http.client.

`--vs REV` adds a third Pager, installed from the wheel of revision REV (checked out into a
temporary worktree) into a venv of its own: a change and its baseline side by side in one run.
The checkout's bytecode is compiled first (PYTHONDONTWRITEBYTECODE would otherwise have every
run compile what changed since the last one that wrote it).

    .venv/bin/python scripts/bench_cli.py [--runs 15] [--seconds 4] [--vs REV] [--json]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_ab import worktrees
from benchlib import (
    CACHE,
    NO_SEND_LIMITS,
    bench_parser,
    machine,
    peer_venv,
    progress,
    report,
)

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT_BIN = Path(sys.executable).parent
SCRIPT = str(ROOT / "scripts" / "pager")
HCOM = "hcom==0.7.31"
TARGETS = {
    "send_over_hcom": 4.0,
    "version_over_bare": 1.3,
    "help_over_bare": 1.3,
    "hook": 1.0,
    "pre_tool": 1.0,
}
WAIT_BOUND = 30  # seconds a reader waits at most: a hang guard, not a timing


def run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> float:
    """Seconds one command takes; a failing command stops the bench (it measured a failure)."""
    start = time.perf_counter()
    # A session of its own, without the bench's terminal: hcom writes window titles to it.
    done = subprocess.run(
        argv, env=env, input=stdin, capture_output=True, check=False, start_new_session=True
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} failed ({done.returncode}): {done.stderr!r}")
    return elapsed


def receipt(
    reader: list[str], sender: list[str], env_r: dict[str, str], env_s: dict[str, str]
) -> float:
    """Seconds from the send's start to the waiting reader's exit with the message."""
    process = subprocess.Popen(
        reader, env=env_r, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        time.sleep(0.4)  # the reader is up and waiting (each starts in well under this)
        start = time.perf_counter()
        run(sender, env_s)
        process.wait(timeout=WAIT_BOUND)
        elapsed = time.perf_counter() - start
    finally:
        if process.poll() is None:
            process.kill()
        out, err = process.communicate()
    if process.returncode != 0 or b"receipt" not in out:
        raise SystemExit(f"bench: {' '.join(reader)} got no message: {out[-300:]!r} {err[-300:]!r}")
    return elapsed


def rate(argv: list[str], env: dict[str, str], seconds: float, senders: int = 4) -> float:
    """Sends/s of `senders` threads each running `argv` one after another for `seconds`."""
    counts = [0] * senders
    until = time.monotonic() + seconds

    def loop(k: int) -> None:
        while time.monotonic() < until:
            run(argv, env)
            counts[k] += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(senders)]
    begin = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - begin)


# -- Pager from its wheel ----------------------------------------------------------------------


def source_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted([root / "pyproject.toml", *(root / "pager").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def wheel_venv(root: Path = ROOT, name: str = "pager-wheel") -> Path:
    """A venv under .cache/ with Pager installed from a wheel of `root` (this checkout, or a
    worktree of another revision); its bin."""
    venv = CACHE / name
    stamp = venv / ".bench-stamp"
    want = source_hash(root)
    if stamp.is_file() and stamp.read_text().strip() == want:
        return venv / "bin"
    progress(f"building Pager's wheel of {root} and installing it into .cache/{name}")
    with tempfile.TemporaryDirectory(prefix="pager-bench-wheel-") as out:
        subprocess.run(
            [str(CHECKOUT_BIN / "pip"), "wheel", "-q", "--no-deps", "--disable-pip-version-check",
             "-w", out, str(root)],
            check=True, capture_output=True,
        )  # fmt: skip
        [wheel] = Path(out).glob("pager-*.whl")
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
             "--force-reinstall", "--no-deps", str(wheel)],
            check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(  # its dependencies, once (they are not reinstalled when present)
            [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
            check=True, capture_output=True,
        )  # fmt: skip
    stamp.write_text(want + "\n")
    return venv / "bin"


# -- the run -----------------------------------------------------------------------------------


def _post(url: str, path: str, secret: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


@contextlib.contextmanager
def pager_broker(
    tmp: Path,
) -> Iterator[tuple[dict[str, str], dict[str, str], dict[str, str], dict[str, str]]]:
    """A broker with alice, bob (shell sessions) and a Claude session for the hook, alice
    holding `src/*.py`: the environments that act as alice, as bob, as the hook's harness, and
    as bob's harness for the pre-tool check (its PAGER_URL and token, as a launch gives them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
    env.update(NO_SEND_LIMITS)
    env["PAGER_HOME"] = str(tmp / "pager-home")
    workspace = tmp / "repo"
    workspace.mkdir()
    pager = str(CHECKOUT_BIN / "pager")
    started = subprocess.run([pager, "start", "--json"], env=env, capture_output=True, check=True)
    try:
        url = json.loads(started.stdout)["url"]
        secret = (Path(env["PAGER_HOME"]) / "secret").read_text().strip()
        here = {"workspace": str(workspace)}
        tokens = {
            name: _post(url, "/v1/register", secret, {**here, "implementation": "shell",
                                                      "session_name": name})["token"]
            for name in ("alice", "bob", "dave")
        }  # fmt: skip
        claude = {"implementation": "claude", "session_name": "carol", "conversation_key": "k"}
        _post(url, "/v1/register", secret, {**here, **claude})
        _post(url, "/v1/me/reservations", tokens["alice"], {"paths": ["src/*.py"]})
        yield (
            {**env, "PAGER_TOKEN": tokens["alice"]},
            {**env, "PAGER_TOKEN": tokens["bob"]},
            {**env, "PWD": str(workspace)},
            {**env, "PWD": str(workspace), "PAGER_URL": url, "PAGER_TOKEN": tokens["bob"]},
        )
    finally:
        subprocess.run([pager, "exit"], env=env, capture_output=True, check=False)


def pre_tool_arguments() -> list[str]:
    """`--pre-tool SPEC EVENT` as Claude Code's manifest wires them."""
    import shlex

    from pager.implementations import discover

    pre_tool = discover(entry_points=False).get("claude").manifest.hooks.pre_tool
    assert pre_tool is not None
    return shlex.split(pre_tool.arguments())


def compile_checkout() -> None:
    """The checkout's bytecode, written now: the figures are of a start that reads it."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *(str(ROOT / d) for d in PACKAGES)],
        check=True,
        capture_output=True,
    )


PACKAGES = ("pager", "actors", "supervisors")


def measure(runs: int, seconds: float, vs: str | None) -> dict[str, Any]:
    hcom_bin = peer_venv(f"hcom-{HCOM.split('==')[1]}", HCOM)
    pagers = {"checkout": CHECKOUT_BIN, "wheel": wheel_venv()}
    if vs is not None:
        with worktrees([vs]) as [tree]:
            pagers["vs"] = wheel_venv(tree, "pager-wheel-vs")
    compile_checkout()
    hcom = str(hcom_bin / "hcom")
    times: dict[str, list[float]] = {}

    def timed(key: str, argv: list[str], env: dict[str, str], stdin: bytes = b"") -> None:
        times.setdefault(key, []).append(run(argv, env, stdin))

    with tempfile.TemporaryDirectory(prefix="pager-bench-cli-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "hcom-home").mkdir()
        hcom_env = {**os.environ, "HOME": str(tmp / "hcom-home")}
        hcom_env.pop("HCOM_DIR", None)
        for name in ("alice", "bob", "dave"):
            run([hcom, "start", "--as", name], hcom_env)
        with pager_broker(tmp) as (alice, bob, harness, editor):
            hook_payload = json.dumps(
                {"session_id": "k", "hook_event_name": "UserPromptSubmit",
                 "cwd": harness["PWD"], "prompt": "hi"}
            ).encode()  # fmt: skip
            edit_payload = json.dumps(
                {"session_id": "k", "hook_event_name": "PreToolUse", "cwd": editor["PWD"],
                 "tool_name": "Edit", "tool_input": {"file_path": "src/x.py"}}
            ).encode()  # fmt: skip
            pre_tool = pre_tool_arguments()
            for n in range(runs):
                progress(f"round {n + 1}/{runs}")
                timed("hcom_version", [hcom, "--version"], hcom_env)
                timed("hcom_help", [hcom, "--help"], hcom_env)
                timed(
                    "hcom_send", [hcom, "send", "@dave", "--name", "alice", "--", f"m{n}"], hcom_env
                )
                times.setdefault("hcom_receipt", []).append(
                    receipt(
                        [hcom, "listen", "--name", "bob", str(WAIT_BOUND)],
                        [hcom, "send", "@bob", "--name", "alice", "--", f"receipt {n}"],
                        hcom_env,
                        hcom_env,
                    )
                )
                for way, bin_dir in pagers.items():
                    pager, python = str(bin_dir / "pager"), str(bin_dir / "python")
                    timed(f"{way}_bare", [python, "-c", "pass"], alice)
                    timed(f"{way}_bare_isolated", [python, "-I", "-S", "-c", "pass"], alice)
                    timed(
                        f"{way}_bare_json_http", [python, "-c", "import json, http.client"], alice
                    )
                    timed(f"{way}_version", [pager, "--version"], alice)
                    timed(f"{way}_help", [pager, "help"], alice)
                    timed(f"{way}_send", [pager, "send", "dave", f"m{n}"], alice)
                    if way == "checkout":
                        timed("script_send", [SCRIPT, "send", "dave", f"s{n}"], alice)
                    timed(f"{way}_hook", [pager, "hook", "--implementation", "claude",
                                          "UserPromptSubmit"], harness, hook_payload)  # fmt: skip
                    timed(f"{way}_pre_tool", [pager, "hook", "--implementation", "claude",
                                              *pre_tool], editor, edit_payload)  # fmt: skip
                    times.setdefault(f"{way}_receipt", []).append(
                        receipt(
                            [pager, "read", "1", "--wait", str(WAIT_BOUND)],
                            [pager, "send", "bob", f"receipt {n}"],
                            bob,
                            alice,
                        )
                    )
            progress(f"4 CLI senders, {seconds:g} s each")
            rates = {
                "hcom": rate(
                    [hcom, "send", "@dave", "--name", "alice", "--", "r"], hcom_env, seconds
                ),
                **{
                    way: rate([str(bin_dir / "pager"), "send", "dave", "r"], alice, seconds)
                    for way, bin_dir in pagers.items()
                },
            }
    medians = {key: round(statistics.median(values) * 1000, 1) for key, values in times.items()}
    ratios: dict[str, float] = {
        "script_send_over_hcom": round(medians["script_send"] / medians["hcom_send"], 2),
        "script_send_over_bare_isolated": round(
            medians["script_send"] / medians["checkout_bare_isolated"], 2
        ),
        "hcom_send_over_bare_isolated": round(
            medians["hcom_send"] / medians["checkout_bare_isolated"], 2
        ),
    }
    for way in pagers:
        ratios[f"{way}_send_over_hcom"] = round(medians[f"{way}_send"] / medians["hcom_send"], 2)
        ratios[f"{way}_send_over_bare_isolated"] = round(
            medians[f"{way}_send"] / medians[f"{way}_bare_isolated"], 2
        )
        ratios[f"{way}_receipt_over_hcom"] = round(
            medians[f"{way}_receipt"] / medians["hcom_receipt"], 2
        )
        for name in ("version", "help"):
            ratios[f"{way}_{name}_over_bare"] = round(
                medians[f"{way}_{name}"] / medians[f"{way}_bare"], 2
            )
        for hook in ("hook", "pre_tool"):
            ratios[f"{way}_{hook}_over_bare_json_http"] = round(
                medians[f"{way}_{hook}"] / medians[f"{way}_bare_json_http"], 2
            )
    return {
        "machine": machine(),
        "runs": runs,
        "peer": HCOM,
        "vs": vs,
        "medians_ms": medians,
        "sends_per_s_4_senders": {k: round(v, 1) for k, v in rates.items()},
        "ratios": ratios,
        "targets": TARGETS,
    }


def _mark(value: float, target: float) -> str:
    return f"{value}x ({'pass' if value <= target else '**miss**'})"


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    m, r, s = results["medians_ms"], results["ratios"], results["sends_per_s_4_senders"]
    rows = [
        ("hcom --version / --help", f"{m['hcom_version']} / {m['hcom_help']} ms", "(peer)"),
        ("hcom send; send -> receipt", f"{m['hcom_send']} ms; {m['hcom_receipt']} ms", "(peer)"),
        ("hcom, 4 CLI senders", f"{s['hcom']} sends/s", "(peer)"),
        (
            "hcom send / bare python -I -S (checkout .venv)",
            f"{r['hcom_send_over_bare_isolated']}x",
            "(load check)",
        ),
        (
            "pager send (scripts/pager, checkout)",
            f"{m['script_send']} ms, {_mark(r['script_send_over_hcom'], 4.0)} hcom,"
            f" {r['script_send_over_bare_isolated']}x bare -I -S",
            "<= 4x hcom",
        ),
    ]
    ways = [("checkout", "checkout .venv"), ("wheel", "installed wheel")]
    if results.get("vs"):
        ways.append(("vs", f"wheel of {results['vs']}"))
    for way, label in ways:
        rows += [
            (
                f"bare interpreter ({label}): -c pass; -I -S -c pass; json+http.client",
                f"{m[f'{way}_bare']} ms; {m[f'{way}_bare_isolated']} ms;"
                f" {m[f'{way}_bare_json_http']} ms",
                "(yardstick)",
            ),
            (
                f"pager --version ({label})",
                f"{m[f'{way}_version']} ms, {_mark(r[f'{way}_version_over_bare'], 1.3)} bare",
                "<= 1.3x bare",
            ),
            (
                f"pager help ({label})",
                f"{m[f'{way}_help']} ms, {_mark(r[f'{way}_help_over_bare'], 1.3)} bare",
                "<= 1.3x bare",
            ),
            (
                f"pager send ({label})",
                f"{m[f'{way}_send']} ms, {_mark(r[f'{way}_send_over_hcom'], 4.0)} hcom,"
                f" {r[f'{way}_send_over_bare_isolated']}x bare -I -S",
                "<= 4x hcom",
            ),
            (
                f"pager send -> receipt ({label})",
                f"{m[f'{way}_receipt']} ms, {r[f'{way}_receipt_over_hcom']}x hcom",
                "",
            ),
            (
                f"pager hook ({label})",
                f"{m[f'{way}_hook']} ms, {_mark(r[f'{way}_hook_over_bare_json_http'], 1.0)}"
                " bare+json+http.client",
                "<= 1.0x",
            ),
            (
                f"pager hook --pre-tool, an Edit refused ({label})",
                f"{m[f'{way}_pre_tool']} ms,"
                f" {_mark(r[f'{way}_pre_tool_over_bare_json_http'], 1.0)} bare+json+http.client",
                "<= 1.0x",
            ),
            (f"pager, 4 CLI senders ({label})", f"{s[way]} sends/s", ""),
        ]
    return rows


def main() -> int:
    parser = bench_parser(__doc__, runs=15, runs_help="interleaved rounds (default 15)")
    parser.add_argument("--seconds", type=float, default=4.0, help="per 4-sender run (4)")
    parser.add_argument("--vs", metavar="REV", help="also Pager installed from REV's wheel")
    args = parser.parse_args()
    if args.runs < 1 or args.seconds <= 0:
        parser.error("--runs must be at least 1 and --seconds above 0")
    results = measure(args.runs, args.seconds, args.vs)
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
