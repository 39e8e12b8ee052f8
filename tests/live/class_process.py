"""Run the real ``prefixlab class`` command in a test: free ports, start, wait, SIGTERM, check nothing is left.

Shared by ``tests/live/test_class_command.py`` and the browser test ``tests/e2e/test_class_live.py``.
Every child the command starts inherits ``PREFIXLAB_TEST_TAG``, so the test finds them all in
``/proc`` and can check that each one is gone after SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.live.conftest import ROOT
from tests.package.processes import port_is_free

START_TIMEOUT_S = 600
TAG_ENV = "PREFIXLAB_TEST_TAG"


def free_run(candidates: range, count: int) -> int:
    return next(p for p in candidates if all(port_is_free(q, reuse=False) for q in range(p, p + count)))


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


def gone(pid: int) -> bool:
    try:
        return b"zombie" in Path(f"/proc/{pid}/status").read_bytes().lower()
    except OSError:
        return True


@dataclass(frozen=True)
class ClassPorts:
    http: int  # replica k on http + k
    router: int  # metrics on router + 1
    events: int
    replay: int
    app: int
    replicas: int

    @classmethod
    def pick(cls, replicas: int, http: range, router: range, events: range, app: range) -> ClassPorts:
        events_base = free_run(events, replicas)
        return cls(free_run(http, replicas), free_run(router, 2), events_base,
                   free_run(range(events_base + replicas, events.stop + 50), replicas), free_run(app, 1), replicas)

    def all(self) -> list[int]:
        k = range(self.replicas)
        return ([self.http + i for i in k] + [self.router, self.router + 1] + [self.events + i for i in k]
                + [self.replay + i for i in k] + [self.app])

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router}"

    @property
    def app_url(self) -> str:
        return f"http://127.0.0.1:{self.app}"


@dataclass
class RunningClass:
    process: subprocess.Popen
    ports: ClassPorts
    tag: str
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def children(self) -> list[int]:
        return processes_with(TAG_ENV, self.tag)

    def stop_and_check(self, children: Sequence[int]) -> None:
        """SIGTERM the command; it must exit 0, every child must be gone and every port free."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(60) == 0, self.log_tail()
        deadline = time.monotonic() + 20
        while not all(gone(pid) for pid in children):
            assert time.monotonic() < deadline, [pid for pid in children if not gone(pid)]
            time.sleep(0.5)
        busy = [port for port in self.ports.all() if not port_is_free(port)]
        assert not busy, f"ports still taken after SIGTERM: {busy}"


@contextmanager
def class_command(ports: ClassPorts, log_dir: Path, *args: str) -> Iterator[RunningClass]:
    """``prefixlab class`` on ``ports`` (plus ``args``), yielded once the router and the app answer."""
    tag = f"prefixlab-class-test-{os.getpid()}-{ports.http}"
    command = [sys.executable, "-m", "prefixlab", "class", "--replicas", str(ports.replicas),
               "--port", str(ports.http), "--router-port", str(ports.router), "--events-port", str(ports.events),
               "--replay-port", str(ports.replay), "--app-port", str(ports.app), "--log-dir", str(log_dir), *args]
    log = log_dir / "class.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONPATH": str(ROOT), TAG_ENV: tag})
    running = RunningClass(process, ports, tag, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (answers(f"{ports.router_url}/health") and answers(f"{ports.app_url}/_stcore/health")):
            assert process.poll() is None, running.log_tail()
            assert time.monotonic() < deadline, running.log_tail()
            time.sleep(1)
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        for pid in processes_with(TAG_ENV, tag):  # a failed test leaves no child behind either
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
