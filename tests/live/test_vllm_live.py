"""Real vLLM on the CPU, watched live: the view's cache must hold exactly the prompts we sent.

Starts ``vllm.entrypoints.openai.api_server`` from the CPU venv (skipped with the reason when it is
absent), subscribes to its KV events, sends chat requests with the real ``openai`` client, and checks
the tree of cached blocks, the hit reported by the server, and /metrics.
"""

from __future__ import annotations

import pytest

from bench.vllm_server import BLOCK_SIZE, start_vllm, wait_healthy
from teaching.live.client import send_chat
from teaching.live.metrics import fetch_metrics
from teaching.live.session import LiveSession
from teaching.live.subscriber import Endpoint
from tests.live.conftest import HTTP_PORTS, ZMQ_PORTS, chat_prompt_ids, free_port
from tests.server.vllm_env import vllm_python

pytestmark = pytest.mark.slow

TUTOR = ("You are PrefixLab's tutor. You explain how serving engines reuse the key-value cache across requests, "
         "block by block, in plain words. Keep every answer to one short sentence. ") * 2
POET = "Poet mode: every answer is a two-line rhyme about the sea and the stars, nothing else. " * 3
QUESTIONS = ("What is a KV cache?", "Why split prompts into blocks?")


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    from engine.config import DEFAULT_MODEL
    from engine.model.loader import resolve_model_folder

    python = vllm_python()  # skips, saying why, when the CPU venv is absent
    http_port = free_port(HTTP_PORTS)
    events_port = free_port(ZMQ_PORTS)
    replay_port = free_port(range(events_port + 1, ZMQ_PORTS.stop))
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    # Eager: the model's forward is not what is tested here, and compiling it takes minutes on a CPU.
    server = start_vllm(python, resolve_model_folder(DEFAULT_MODEL), http_port, events_port, replay_port, log,
                        extra_args=("--enforce-eager",))
    try:
        if not wait_healthy(server):
            pytest.fail(f"vLLM did not become healthy:\n{server.log_tail()}")
        yield server
    finally:
        server.stop()


def chunks(ids: list[int]) -> list[tuple[int, ...]]:
    return [tuple(ids[i:i + BLOCK_SIZE]) for i in range(0, len(ids) - BLOCK_SIZE + 1, BLOCK_SIZE)]


def test_the_live_view_holds_what_was_sent(vllm, hf_tokenizer):
    session = LiveSession([Endpoint("vllm", vllm.events, vllm.replay, vllm.http, topic="kv")]).start()
    try:
        assert session.wait_for(lambda s: s.subscribers[0].connected and s.subscribers[0].expected_seq is not None, 30)
        conversations = [[{"role": "system", "content": system}, {"role": "user", "content": question}]
                         for system in (TUTOR, POET) for question in QUESTIONS]
        results = [send_chat(vllm.http, messages, max_tokens=8) for messages in conversations]
        prompts = [chat_prompt_ids(hf_tokenizer, messages) for messages in conversations]

        # what the server says: token counts match ours, and the second question of each system prompt hit
        assert [r.prompt_tokens for r in results] == [len(p) for p in prompts]
        shared = [0, len(_common(chunks(prompts[0]), chunks(prompts[1]))), 0,
                  len(_common(chunks(prompts[2]), chunks(prompts[3])))]
        assert shared[1] > 0 and shared[3] > 0
        assert [r.cached_tokens for r in results] == [n * BLOCK_SIZE for n in shared]

        # what the events say: every prompt's full blocks form one path of the tree, root first
        replica = session.state.replica("vllm")
        wanted = {c for p in prompts for c in chunks(p)}
        assert session.wait_for(
            lambda s: wanted <= {b.token_ids for b in s.state.replica("vllm").blocks.values()}, 30), \
            "the view is missing blocks of a sent prompt"
        for prompt in prompts:
            path = _path_of(replica, chunks(prompt))
            assert [b.token_ids for b in path] == chunks(prompt)
            assert path[0].parent is None
        # two system prompts -> two roots (nothing else was sent to this server)
        roots = [b for b in replica.blocks.values() if b.parent is None]
        assert len(roots) == 2
        assert replica.block_size == BLOCK_SIZE
        assert [f.seq for f in session.recording] == list(range(len(session.recording)))

        metrics = fetch_metrics(vllm.http)
        assert metrics.prefix_cache_queries == sum(len(p) for p in prompts)
        assert metrics.prefix_cache_hits == sum(shared) * BLOCK_SIZE
        assert metrics.kv_cache_usage is not None
    finally:
        session.stop()


def _common(a: list, b: list) -> list:
    out = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        out.append(x)
    return out


def _path_of(replica, blocks: list[tuple[int, ...]]):
    """Walk the tree from the roots following ``blocks``' tokens."""
    children = replica.children()
    path = []
    parent = None
    for tokens in blocks:
        match = [k for k in children.get(parent, []) if replica.blocks[k].token_ids == tokens]
        assert match, f"block {len(path)} of a sent prompt is not cached under its parent"
        parent = match[0]
        path.append(replica.blocks[parent])
    return path
