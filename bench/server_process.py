"""Start a real ``prefixlab serve`` subprocess on a loopback port, wait for it, stop it.

Used by ``bench/serve.py`` and by the server tests (``tests/server``).

Ports come from a small range (``PREFIXLAB_TEST_HTTP_PORTS`` / ``PREFIXLAB_TEST_ZMQ_PORTS``,
"first-last") so parallel test runs on a shared machine can be given disjoint ones.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The port ranges servers started here take, as (variable that overrides it, default "first-last").
HTTP_PORTS = ("PREFIXLAB_TEST_HTTP_PORTS", "8100-8199")
ZMQ_PORTS = ("PREFIXLAB_TEST_ZMQ_PORTS", "5600-5699")


def _port_range(var: str, default: str) -> range:
    first, last = (int(p) for p in os.environ.get(var, default).split("-"))
    return range(first, last + 1)


def free_ports(count: int, var: str, default: str, taken: set[int] = set()) -> list[int]:  # noqa: B006
    """``count`` ports of the range that nothing listens on yet (remembered, so never handed out twice)."""
    found = []
    for port in _port_range(var, default):
        if port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"No {count} free ports in {var}")


@dataclass
class ServerProcess:
    process: subprocess.Popen
    port: int
    log_path: Path
    zmq_endpoint: str | None = None  # where a subscriber connects
    zmq_replay: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_server(*args: str, log_dir: Path, kv_events: bool = True, timeout_s: float = 240.0) -> ServerProcess:
    """``prefixlab serve`` with ``args``; returns once ``/health`` answers (or raises with the log)."""
    (port,) = free_ports(1, *HTTP_PORTS)
    command = [sys.executable, "-m", "prefixlab.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    pub = replay = None
    if kv_events:
        pub_port, replay_port = free_ports(2, *ZMQ_PORTS)
        config = {"enable_kv_cache_events": True, "endpoint": f"tcp://*:{pub_port}",
                  "replay_endpoint": f"tcp://127.0.0.1:{replay_port}", "topic": "kv"}
        command += ["--kv-events-config", json.dumps(config)]
        pub, replay = f"tcp://127.0.0.1:{pub_port}", f"tcp://127.0.0.1:{replay_port}"
    log_path = log_dir / f"serve-{port}.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = ServerProcess(process, port, log_path, pub, replay)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"prefixlab serve exited with {process.returncode}:\n{server.log()[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"prefixlab serve did not answer /health in {timeout_s:.0f} s:\n{server.log()[-3000:]}")


def metric(server: ServerProcess, name: str) -> float:
    """One sample of ``/metrics`` (the first line starting with ``name{`` or ``name ``)."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)
