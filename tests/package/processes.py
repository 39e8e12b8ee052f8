"""Start a server as the user would, find every process it starts, stop it with a signal and check they are gone."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import psutil

from engine.server import cluster


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_is_free(port: int, reuse: bool = True) -> bool:
    """True when nothing listens on ``port``. ``reuse``: bind as a server does (SO_REUSEADDR), so this run's
    connections lingering in TIME_WAIT do not count: a fresh server could bind it now."""
    with socket.socket() as probe:
        if reuse:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_healthy(process: subprocess.Popen, url: str, log: Path, timeout_s: float) -> None:
    """The class command's own wait (engine.server.cluster): fails with the server's log."""
    cluster.wait_healthy(url, process, log, timeout_s, "the server")


def family(pid: int) -> list[psutil.Process]:
    """The process and every descendant it has now."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def stop_and_check(process: subprocess.Popen, started: list[psutil.Process], port: int, sig: int,
                   timeout_s: float = 30.0) -> None:
    """Send ``sig`` to the process the user started only; every process it started must end and the port be free."""
    os.kill(process.pid, sig)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the process did not stop within {timeout_s:.0f} s of signal {sig}") from None
    deadline = time.monotonic() + timeout_s
    left = started
    while time.monotonic() < deadline:
        left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not left and port_is_free(port):
            return
        time.sleep(0.2)
    for p in left:  # clean up before failing, so that a failure leaves nothing behind either
        p.kill()
    raise AssertionError(f"after signal {sig}: still running {[(p.pid, p.cmdline()) for p in left]}; "
                         f"port {port} free: {port_is_free(port)}")
