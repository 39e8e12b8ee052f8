"""``prefixlab class``: replicas, vLLM's router and the app start wired together; SIGTERM stops them all.

Runs the real command (tiny pools, round robin so any replica answers), sends a chat request through
the router, checks that the app was told where the router and every replica are, then sends SIGTERM
and checks that every child is gone and every port is free again. Skips without ``vllm-router``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import OpenAI

from engine.server.cluster import find_router, router_missing_message
from tests.live.class_process import ClassPorts, class_command, processes_with
from tests.ports import for_worker
from ui.class_config import CLASS_SERVER_ENV, LIVE_SERVERS_ENV

pytestmark = pytest.mark.slow


def test_class_command_starts_wires_and_stops_everything(tmp_path):
    if find_router() is None:
        pytest.skip(router_missing_message())
    ports = ClassPorts.pick(2, http=for_worker(range(8240, 8290, 5)), router=for_worker(range(8290, 8300, 2)),
                            events=for_worker(range(5740, 5790, 4)), app=for_worker(range(8570, 8600)))
    with class_command(ports, tmp_path, "--policy", "round_robin", "--num-blocks", "64") as running:
        api = OpenAI(base_url=f"{ports.router_url}/v1", api_key="none", max_retries=0, timeout=300)
        model = api.models.list().data[0].id
        reply = api.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello, class!"}],
                                            max_tokens=2)
        assert reply.usage.prompt_tokens > 0

        children = running.children()
        assert len(children) >= 4  # the command, two replicas, the app (the router binary too)
        app = processes_with(CLASS_SERVER_ENV, ports.router_url)
        assert app, "the app was not told the router's URL"
        environ = Path(f"/proc/{app[0]}/environ").read_bytes().split(b"\0")
        live = next(e for e in environ if e.startswith(LIVE_SERVERS_ENV.encode() + b"=")).decode()
        for k in range(2):
            assert (f"tcp://127.0.0.1:{ports.events + k} tcp://127.0.0.1:{ports.replay + k} "
                    f"http://127.0.0.1:{ports.http + k}") in live

        running.stop_and_check(children)
