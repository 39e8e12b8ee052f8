"""``prefixlab class``: replicas, vLLM's router and the app start wired together; SIGTERM stops them all.

Runs the real command (tiny pools, round robin so any replica answers), sends a chat request through
the router, checks that the app was told where the router and every replica are, then sends SIGTERM
and checks that every child is gone and every port is free again. Skips without ``vllm-router``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from openai import OpenAI

from engine.server.cluster import find_router, router_missing_message
from tests.live.conftest import ROOT
from ui.class_config import CLASS_SERVER_ENV, LIVE_SERVERS_ENV

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 600


def free(port: int, reuse: bool = False) -> bool:
    """Nothing listens on ``port``. ``reuse``: bind as a server does (SO_REUSEADDR), so connections of the
    run that linger in TIME_WAIT do not count: a new server could listen there at once."""
    with socket.socket() as sock:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_run(candidates: range, count: int) -> int:
    return next(p for p in candidates if all(free(q) for q in range(p, p + count)))


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def processes_with(variable: str, value: str) -> list[int]:
    """Pids whose environment carries ``variable=value`` (the children this test's command started)."""
    wanted = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_class_command_starts_wires_and_stops_everything(tmp_path):
    if find_router() is None:
        pytest.skip(router_missing_message())
    http = free_run(range(8240, 8290, 5), 2)
    router_port = free_run(range(8290, 8300, 2), 2)
    events = free_run(range(5740, 5790, 4), 2)
    replay = free_run(range(events + 2, 5800, 2), 2)
    app_port = free_run(range(8570, 8600), 1)
    ports = [http, http + 1, router_port, router_port + 1, events, events + 1, replay, replay + 1, app_port]
    tag = f"prefixlab-class-test-{os.getpid()}"
    command = [sys.executable, "-m", "prefixlab", "class", "--replicas", "2", "--policy", "round_robin",
               "--port", str(http), "--router-port", str(router_port), "--events-port", str(events),
               "--replay-port", str(replay), "--app-port", str(app_port), "--num-blocks", "64",
               "--log-dir", str(tmp_path)]
    log = tmp_path / "class.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT), "PREFIXLAB_TEST_TAG": tag})
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (answers(f"http://127.0.0.1:{router_port}/health")
                   and answers(f"http://127.0.0.1:{app_port}/_stcore/health")):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        api = OpenAI(base_url=f"http://127.0.0.1:{router_port}/v1", api_key="none", max_retries=0, timeout=300)
        model = api.models.list().data[0].id
        reply = api.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello, class!"}],
                                            max_tokens=2)
        assert reply.usage.prompt_tokens > 0

        children = processes_with("PREFIXLAB_TEST_TAG", tag)
        assert len(children) >= 4  # the command, two replicas, the app (the router binary too)
        app = processes_with(CLASS_SERVER_ENV, f"http://127.0.0.1:{router_port}")
        assert app, "the app was not told the router's URL"
        environ = Path(f"/proc/{app[0]}/environ").read_bytes().split(b"\0")
        live = next(e for e in environ if e.startswith(LIVE_SERVERS_ENV.encode() + b"=")).decode()
        for k in range(2):
            assert f"tcp://127.0.0.1:{events + k} tcp://127.0.0.1:{replay + k} http://127.0.0.1:{http + k}" in live

        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()[-3000:]
        deadline = time.monotonic() + 20
        while any(Path(f"/proc/{pid}").exists() and b"zombie" not in _status(pid) for pid in children):
            assert time.monotonic() < deadline, [pid for pid in children if Path(f"/proc/{pid}").exists()]
            time.sleep(0.5)
        busy = [port for port in ports if not free(port, reuse=True)]
        assert not busy, f"ports still taken after SIGTERM: {busy}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def _status(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/status").read_bytes().lower()
    except OSError:
        return b"zombie"
