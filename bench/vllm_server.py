"""Start real vLLM's OpenAI server on the CPU (from the venv ``vllm-env cpu`` builds) with KV events on.

Plain functions shared by the live tests and the serving benchmark (``bench/serve_vs_vllm.py``); the
tests find the venv (or skip, with the reason) through :func:`tests.server.vllm_env.vllm_python`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

#: vLLM's CPU attention wants a block size that is a multiple of 32; a small pool shows eviction.
BLOCK_SIZE = 32
NUM_BLOCKS = 64  # one is vLLM's null block: 63 usable, so --max-model-len stays below 2016
SERVED_NAME = "smollm2"
#: Starting vLLM on a busy 2-core machine takes minutes (model registry probe, warm-up).
START_TIMEOUT_S = 900


@dataclass
class VllmServer:
    process: subprocess.Popen
    http: str
    events: str
    replay: str
    log_path: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self) -> None:
        """Stop the server and every process it started (its engine core and workers share its group)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # what outlived the API server
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def start_vllm(python: Path, model_folder: str, http_port: int, events_port: int, replay_port: int,
               log_path: Path, num_blocks: int = NUM_BLOCKS, max_model_len: int = 1024, nice: int = 5,
               extra_args: tuple[str, ...] = (), extra_env: dict[str, str] | None = None) -> VllmServer:
    """vLLM serving ``model_folder`` as :data:`SERVED_NAME`, its pool fixed at ``num_blocks`` blocks of
    :data:`BLOCK_SIZE` tokens, under ``nice`` (the tests keep it below the browser's priority)."""
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{events_port}",
              "replay_endpoint": f"tcp://*:{replay_port}", "topic": "kv"}
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1", **(extra_env or {}))
    env.pop("PYTHONPATH", None)  # vLLM's venv, not ours
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", model_folder,
               "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(http_port),
               "--block-size", str(BLOCK_SIZE), "--num-gpu-blocks-override", str(num_blocks),
               "--max-model-len", str(max_model_len), "--enable-prompt-tokens-details",
               "--kv-events-config", json.dumps(config), *extra_args]
    log = open(log_path, "w")
    process = subprocess.Popen(["nice", "-n", str(nice), *command], stdout=log, stderr=subprocess.STDOUT, env=env,
                               start_new_session=True)
    return VllmServer(process, f"http://127.0.0.1:{http_port}", f"tcp://127.0.0.1:{events_port}",
                      f"tcp://127.0.0.1:{replay_port}", log_path)


def wait_healthy(server: VllmServer, timeout_s: float = START_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(server.http + "/health", timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    return False
