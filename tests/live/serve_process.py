"""Run ``prefixlab serve`` (PrefixLab's own class server) as a child process with KV events on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.live.conftest import HTTP_PORTS, ROOT, ZMQ_PORTS, free_port

START_TIMEOUT_S = 300
NUM_BLOCKS = 48
BLOCK_SIZE = 16  # prefixlab serve's default


@dataclass
class ClassServer:
    http: str
    events: str
    replay: str
    command: list[str]
    log_path: Path
    process: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(self.command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                        env=dict(os.environ, PYTHONPATH=str(ROOT)))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()[-3000:]
            try:
                with urllib.request.urlopen(self.http + "/health", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(1)
        raise AssertionError("prefixlab serve did not become healthy:\n" + self.log_path.read_text()[-3000:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def class_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClassServer]:
    http_port = free_port(HTTP_PORTS)
    events_port = free_port(ZMQ_PORTS)
    replay_port = free_port(range(events_port + 1, ZMQ_PORTS.stop))
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{events_port}",
              "replay_endpoint": f"tcp://*:{replay_port}", "topic": "kv"}
    command = [sys.executable, "-m", "prefixlab.cli", "serve", "--host", "127.0.0.1", "--port", str(http_port),
               "--num-blocks", str(NUM_BLOCKS), "--block-size", str(BLOCK_SIZE), "--kv-events-config", json.dumps(config)]
    server = ClassServer(f"http://127.0.0.1:{http_port}", f"tcp://127.0.0.1:{events_port}",
                         f"tcp://127.0.0.1:{replay_port}", command, tmp_path_factory.mktemp("serve") / "serve.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


