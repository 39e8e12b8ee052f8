"""The fast paths: stacked projections share memory with the HF model, decodes are attended in one
batched call that equals attending each request alone, the engine times each request's phases,
and the thread rule picks one thread on a busy machine."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model import ModelBackend
from engine.model.attention import AttentionMetadata, decode_attention
from engine.model.kv_tensors import PagedKVCache
from engine.model.llama import LlamaForward
from engine.model.loader import load_model
from engine.model.threads import threads_for_load


def test_stacked_projections_are_the_hf_weights_not_copies(tiny_model_dirs):
    config = EngineConfig(model=tiny_model_dirs["llama"], num_blocks=32, block_size=4)
    loaded = load_model(config.model, torch.float32, torch.device("cpu"))
    first, second = ModelBackend(config, loaded=loaded).model, ModelBackend(config, loaded=loaded).model
    assert isinstance(first, LlamaForward) and isinstance(second, LlamaForward)
    assert first.layers is second.layers  # stacked once per model, shared by engines
    layer, w = loaded.hf_model.model.layers[0], first.layers[0]
    q_rows = layer.self_attn.q_proj.weight.shape[0]
    assert layer.self_attn.q_proj.weight.data_ptr() == w.qkv.data_ptr()
    assert layer.self_attn.k_proj.weight.data_ptr() == w.qkv[q_rows:].data_ptr()
    assert layer.self_attn.v_proj.weight.data_ptr() == w.qkv[-layer.self_attn.v_proj.weight.shape[0]:].data_ptr()


def assert_each_equals_attending_alone(batched, q, cache, tables, lens) -> None:
    """Each request's row of a batched decode == plain SDPA over its own context, read through its table."""
    for i, (table, n) in enumerate(zip(tables, lens)):
        k, v = cache[0].read(torch.tensor(table), n)
        alone = F.scaled_dot_product_attention(q[i:i + 1].transpose(0, 1)[None], k.transpose(0, 1)[None],
                                               v.transpose(0, 1)[None], scale=0.3, enable_gqa=True)
        torch.testing.assert_close(batched[i], alone[0].transpose(0, 1)[0], atol=1e-5, rtol=1e-5)


def test_batched_decode_attention_equals_one_request_at_a_time():
    torch.manual_seed(0)
    block_size, heads, kv_heads, dim = 4, 6, 2, 8
    cache = PagedKVCache(1, 16, block_size, kv_heads, dim, torch.float32, "cpu")
    cache.data.normal_()
    tables, lens = [[3, 7, 1], [5], [2, 9, 11, 4]], [10, 2, 16]
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], block_size, "cpu")
    assert meta.decode is not None and meta.decode.contiguous_from == 0
    q = torch.randn(3, heads, dim)
    batched = decode_attention(q, cache[0], meta.decode, scale=0.3)
    assert_each_equals_attending_alone(batched, q, cache, tables, lens)


def test_metadata_finds_decodes_among_prefills():
    meta = AttentionMetadata.build([([1, 2], 0, 6), ([9], 2, 1), ([3, 4], 5, 3), ([6], 0, 1)], block_size=4, device="cpu")
    assert meta.decode is not None
    assert meta.decode.rows.tolist() == [6, 10] and meta.decode.contiguous_from is None
    assert meta.decode.block_tables.tolist() == [[9], [6]]
    assert meta.decode.key_mask[:, 0, 0].tolist() == [[True] * 3 + [False], [True] + [False] * 3]
    assert [s.query_len for s in meta.prefills] == [6, 3]


def test_engine_times_each_phase_of_a_request(tiny_model_dirs):
    engine = LLMEngine(EngineConfig(model=tiny_model_dirs["llama"], block_size=4, num_blocks=64, max_num_seqs=1))
    first, second = engine.generate([[5, 6, 7, 8, 9, 10, 11], [1, 2, 3, 4, 5]], SamplingParams(max_tokens=4, ignore_eos=True))
    a, b = first.metrics, second.metrics
    assert a is not None and b is not None
    for m in (a, b):
        assert m.queue_time is not None and m.scheduled_ttft is not None and m.ttft is not None
        assert 0 < m.prefill_time <= m.scheduled_ttft
        assert abs(m.ttft - (m.queue_time + m.scheduled_ttft)) < 1e-9
        assert m.tokens_per_s and m.tokens_per_s > 0
    # One request at a time: the second waited in the queue while the first ran to its end.
    assert a.finished_time is not None and b.queue_time is not None
    assert b.queue_time >= a.finished_time - a.arrival_time - 1e-3
    shown = b.as_dict()
    assert {"queue_s", "prefill_s", "scheduled_ttft_s", "tokens_per_s"} <= shown.keys()


def test_one_thread_while_others_want_the_cores():
    assert threads_for_load(0.3, 2) == 2
    assert threads_for_load(2.0, 2) == 2  # our own two threads
    assert threads_for_load(3.5, 2) == 1
    assert threads_for_load(20.0, 16) == 1 and threads_for_load(9.0, 16) == 16


def test_decodes_sharing_their_context_read_it_once_and_equal_one_request_at_a_time():
    torch.manual_seed(1)
    block_size, heads, kv_heads, dim = 4, 6, 2, 8
    cache = PagedKVCache(1, 32, block_size, kv_heads, dim, torch.float32, "cpu")
    cache.data.normal_()
    prefix = [3, 7, 1, 12, 5]  # a shared system prompt: five full blocks
    tables = [prefix + [20], prefix + [21, 22], prefix + [9], prefix]
    lens = [22, 27, 21, 19]  # the last ends inside the shared prefix's last block
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], block_size, "cpu")
    assert meta.decode is not None and meta.decode.shared_blocks is not None  # the union path was taken
    assert meta.decode.shared_blocks.tolist() == sorted(set(prefix + [20, 21, 22, 9]))
    q = torch.randn(4, heads, dim)
    batched = decode_attention(q, cache[0], meta.decode, scale=0.3)
    assert_each_equals_attending_alone(batched, q, cache, tables, lens)


def test_decodes_with_little_in_common_keep_the_padded_gather():
    tables = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    meta = AttentionMetadata.build([(t, 10, 1) for t in tables], block_size=4, device="cpu")
    assert meta.decode is not None and meta.decode.shared_blocks is None and meta.decode.block_tables is not None
