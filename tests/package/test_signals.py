"""``prefixlab app`` and ``prefixlab serve``: SIGTERM or Ctrl-C to the process the user started stops it all.

The app used to run Streamlit in a child process: a SIGTERM to ``prefixlab app`` ended the parent and
left the child serving, holding the port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.package.processes import family, free_port, stop_and_check, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


def start(args: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "prefixlab", *args], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_app_stops_on_signal(sig: int, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "app.log"
    process = start(["app", "--server.port", str(port), "--server.address", "127.0.0.1"], log)
    try:
        wait_healthy(process, f"http://127.0.0.1:{port}/_stcore/health", log, timeout_s=120)
        stop_and_check(process, family(process.pid), port, sig)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_serve_stops_on_signal(sig: int, tiny_model_dirs: dict[str, str], tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "serve.log"
    process = start(["serve", "--model", tiny_model_dirs["llama"], "--host", "127.0.0.1", "--port", str(port),
                     "--num-blocks", "16"], log)
    try:
        wait_healthy(process, f"http://127.0.0.1:{port}/health", log, timeout_s=180)
        stop_and_check(process, family(process.pid), port, sig)
    finally:
        if process.poll() is None:
            process.kill()
