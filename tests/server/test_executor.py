"""``prefixlab serve`` runs its forward passes in a worker process (engine.runtime.worker) beside the HTTP
server, as vLLM runs its engine core apart from its API server; ``--executor in-process`` keeps them in it.
(That its greedy answers are the model's own is tests/server/test_openai_client.py's business.)"""

from __future__ import annotations

import json
import os

import psutil

from tests.server.harness import start_server
from tests.server.http import post


def worker_children(server) -> list[psutil.Process]:
    children = psutil.Process(server.process.pid).children(recursive=True)
    return [child for child in children if "engine.runtime.worker" in " ".join(child.cmdline())]


def complete(server) -> dict:
    status, _, raw = post(server.url, "/v1/completions", {"model": "tiny", "prompt": [5, 9, 13, 2, 7, 11],
                                                          "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    assert status == 200, raw
    return json.loads(raw)


def test_serve_runs_its_passes_in_a_worker_process(tiny_server):
    assert len(worker_children(tiny_server)) == 1
    assert complete(tiny_server)["usage"]["completion_tokens"] == 6


def test_in_process_executor_starts_no_worker(tmp_path, tiny_model_dirs):
    server = start_server("--model", tiny_model_dirs["llama"], "--served-model-name", "tiny", "--num-blocks", "32",
                          "--block-size", "4", "--executor", "in-process", log_dir=tmp_path, kv_events=False)
    try:
        assert worker_children(server) == []
        assert complete(server)["usage"]["completion_tokens"] == 6
    finally:
        server.stop()


def test_threads_fix_the_workers_thread_count(tmp_path, tiny_model_dirs):
    """``--threads N`` gives the passes N cores whatever the load (as vLLM binds its threads): the worker
    inherits the fixed count (engine.model.threads), so OpenMP spins there too (tests/model/test_fast_paths.py)."""
    server = start_server("--model", tiny_model_dirs["llama"], "--served-model-name", "tiny", "--num-blocks", "32",
                          "--block-size", "4", "--threads", "1", log_dir=tmp_path, kv_events=False)
    try:
        (worker,) = worker_children(server)
        assert worker.environ().get("PREFIXLAB_NUM_THREADS") == "1"
        assert worker.environ().get("OMP_WAIT_POLICY") == os.environ.get("OMP_WAIT_POLICY")  # not chosen by the load
        assert complete(server)["usage"]["completion_tokens"] == 6
    finally:
        server.stop()
