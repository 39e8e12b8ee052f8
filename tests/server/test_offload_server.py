"""``prefixlab serve --kv-offloading-size``: a prefix evicted from the device pool comes back from the tier.

The real default model behind the real server with a 9-block device pool and a host tier, driven by
the real ``openai`` client: document A, then B (which evicts A from the device pool), then A again.
The third request must report ``cached_tokens`` that the device pool did not supply, ``/metrics``
must count them as external hits (and export the block residency histograms), the KV events must
announce the tier's blocks with ``medium="CPU"``, and the greedy text must equal transformers'.
"""

from __future__ import annotations

import time

import pytest
import zmq
from openai import OpenAI

from engine import EngineConfig, LLMEngine
from engine.config import DEFAULT_MODEL
from engine.kv_events import decode_batch
from tests.model.tiny_models import hf_greedy
from tests.server.harness import metric, start_server

pytestmark = pytest.mark.slow
MAX_TOKENS = 8
A = ("Prefix caching keeps the key and value tensors of a prompt's blocks after a request ends, so the next "
     "request that starts with the same tokens skips their prefill. Blocks are hashed in a chain: each hash "
     "covers the block's tokens and its parent's hash, so equal hashes mean equal prefixes. When the pool is "
     "full, the least recently freed block is evicted and its hash forgotten. Summarise this in one line:")
B = ("A second tier keeps evicted blocks in host memory. Loading a block back over the bus costs far less "
     "than recomputing it through every layer of the model, so a request whose prefix left the device can "
     "still skip most of its prefill. vLLM stores each full prompt block to the CPU as soon as it is computed "
     "and looks there after the device pool misses. Explain why the head block matters most:")


@pytest.fixture(scope="module")
def offload_server(tmp_path_factory):
    server = start_server("--num-blocks", "9", "--kv-offloading-size", "0.05", "--kv-offloading-policy", "lru",
                          "--kv-cache-metrics", "--kv-cache-metrics-sample", "1.0",
                          log_dir=tmp_path_factory.mktemp("serve-offload"))
    yield server
    server.stop()


def test_evicted_prefix_is_served_from_the_tier(offload_server):
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.connect(offload_server.zmq_endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    time.sleep(0.5)  # let the subscription reach the publisher
    api = OpenAI(base_url=offload_server.url + "/v1", api_key="none", max_retries=0, timeout=180)
    outs = [api.completions.create(model=DEFAULT_MODEL, prompt=p, max_tokens=MAX_TOKENS, temperature=0)
            for p in (A, B, A)]
    assert outs[0].usage.prompt_tokens_details.cached_tokens == 0
    cached = outs[2].usage.prompt_tokens_details.cached_tokens
    external = metric(offload_server, "vllm:external_prefix_cache_hits_total")
    device = metric(offload_server, "vllm:prefix_cache_hits_total")
    assert cached > 0 and external > 0
    assert cached == external + device  # every cached token came from one of the two tiers
    assert metric(offload_server, "vllm:kv_block_lifetime_seconds_count") > 0  # B evicted A's device blocks
    media: set[str | None] = set()
    while sub.poll(2000):
        _topic, _seq, payload = sub.recv_multipart()
        media |= {getattr(e, "medium", None) for e in decode_batch(payload).events}
    assert {"GPU", "CPU"} <= media
    local = LLMEngine(EngineConfig(model=DEFAULT_MODEL))
    for prompt, out in zip((A, B, A), outs):
        expected = hf_greedy(local.backend.hf_model, local.tokenize(prompt), MAX_TOKENS)
        assert out.choices[0].text == local.tokenizer.decode(expected)
