"""Replay the chat requests of a real vLLM 0.32 recording through ``prefixlab serve``: the server must
publish the same KV events (same 64-bit block hashes, tokens, parents) and report the same cached tokens."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from openai import OpenAI

from engine.kv_events import BlockStored, decode_batch
from tests.server.harness import start_server
from tests.server.test_room import Subscriber

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-kv-events"
FRAMES, REQUESTS = FIXTURES / "vllm-0.32-kv-events.jsonl", FIXTURES / "vllm-0.32-kv-events.requests.json"
SAME_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
               "group_idx", "kv_cache_spec_kind")


@pytest.fixture(scope="module")
def vllm_like_server(tmp_path_factory):
    """Configured like the recording's vLLM server: 32-token blocks, the model served as "smollm2"."""
    server = start_server("--block-size", "32", "--served-model-name", "smollm2",
                          log_dir=tmp_path_factory.mktemp("serve-vllm-like"))
    yield server
    server.stop()


def test_same_requests_same_kv_events_and_cached_tokens(vllm_like_server):
    recorded = [e for line in FRAMES.read_text().splitlines()
                for e in decode_batch(base64.b64decode(json.loads(line)["payload_b64"])).events]
    exchanges = json.loads(REQUESTS.read_text())
    api = OpenAI(base_url=vllm_like_server.url + "/v1", api_key="none", max_retries=0, timeout=300)
    subscriber = Subscriber(vllm_like_server.zmq_endpoint)
    try:
        for exchange in exchanges:
            body = dict(exchange["request"])
            salt = body.pop("cache_salt", None)
            answer = api.chat.completions.create(**body, extra_body={"cache_salt": salt} if salt else None)
            assert answer.usage.prompt_tokens == exchange["usage"]["prompt_tokens"]
            assert (answer.usage.prompt_tokens_details.cached_tokens
                    == exchange["usage"]["prompt_tokens_details"]["cached_tokens"])
            assert (answer.usage.prompt_tokens_details.created_cache_tokens
                    == exchange["usage"]["prompt_tokens_details"]["created_cache_tokens"])
        ours = [e for e in (ev for _, _, p in subscriber.frames(
            lambda events: sum(isinstance(e, BlockStored) for e in events) >= len(recorded))
            for ev in decode_batch(p).events)]
    finally:
        subscriber.close()
    stored = [e for e in ours if isinstance(e, BlockStored)]
    assert len(stored) == len(recorded)
    for mine, theirs in zip(stored, recorded):
        assert {f: getattr(mine, f) for f in SAME_FIELDS} == {f: getattr(theirs, f) for f in SAME_FIELDS}
