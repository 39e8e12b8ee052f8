"""The fast paths: projections are stacked and packed once per model, decodes are attended in one
batched call that equals attending each request alone, the engine times each request's phases,
and the thread rule picks one thread on a busy machine."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model import ModelBackend, layers
from engine.model.attention import AttentionMetadata, decode_attention, prefill_attention
from engine.model.host_memory import hand_back_pages
from engine.model.kv_tensors import PagedKVCache
from engine.model.layers import Projection, rms_norm
from engine.model.llama import LlamaForward
from engine.model.loader import load_model
from engine.model.native import kernels_for
from engine.model.threads import threads_for_load
from engine.runtime import host


def test_projections_are_made_once_per_model_and_compute_what_the_hf_layers_do(tiny_model_dirs):
    config = EngineConfig(model=tiny_model_dirs["llama"], num_blocks=32, block_size=4)
    loaded = load_model(config.model, torch.float32, torch.device("cpu"))
    first, second = ModelBackend(config, loaded=loaded).model, ModelBackend(config, loaded=loaded).model
    assert isinstance(first, LlamaForward) and isinstance(second, LlamaForward)
    assert first.layers is second.layers  # packed once per model, shared by engines
    attn, w = loaded.hf_model.model.layers[0].self_attn, first.layers[0]
    x = torch.randn(5, attn.q_proj.weight.shape[1])
    stacked = torch.cat([attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)], dim=-1)
    torch.testing.assert_close(w.qkv(x), stacked)
    assert w.qkv.native == kernels_for(attn.q_proj.weight.device, attn.q_proj.weight.dtype)


def test_a_projection_without_the_cpu_kernels_uses_the_plain_stacked_weight():
    modules = [torch.nn.Linear(8, 4).to(torch.bfloat16), torch.nn.Linear(8, 6).to(torch.bfloat16)]
    projection = Projection(modules)
    assert not projection.native and projection.weight.shape == (10, 8)
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    torch.testing.assert_close(projection(x), torch.cat([m(x) for m in modules], dim=-1))


def test_projection_post_ops_equal_the_separate_torch_ops():
    torch.manual_seed(3)
    linear = torch.nn.Linear(16, 24)
    projection = Projection([linear], hand_back=False)
    assert projection.onednn == torch.backends.mkldnn.is_available()  # prefills take oneDNN where torch has it
    close = {"atol": 1e-5, "rtol": 1e-5}
    for rows in (5, 40):  # the small-batch kernel (on the CPU in fp32), then oneDNN's with the op fused
        x, other = torch.randn(rows, 16), torch.randn(rows, 24)
        plain = F.linear(x, linear.weight, linear.bias)
        torch.testing.assert_close(projection(x), plain, **close)
        torch.testing.assert_close(projection.add_to(x, other), other + plain, **close)
        torch.testing.assert_close(projection.times(x, other), plain * other, **close)
        torch.testing.assert_close(projection.silu(x), F.silu(plain), **close)


@pytest.mark.parametrize("kernel", [False, True])
def test_rms_norm_equals_hf_in_fp32_and_bf16(kernel, monkeypatch):
    """torch's path gives HF's numbers exactly; the CPU kernel (fp32) sums in another order."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    if kernel and not kernels_for("cpu", torch.float32):
        pytest.skip("the CPU kernels did not build here (no C compiler)")
    monkeypatch.setattr(layers, "kernels_for", lambda device, dtype: kernel and kernels_for(device, dtype))
    for dtype in (torch.float32, torch.bfloat16):
        hf = LlamaRMSNorm(32, eps=1e-5).to(dtype)
        hf.weight.data.normal_()
        x = torch.randn(7, 32).to(dtype)
        exact = not kernel or dtype != torch.float32
        torch.testing.assert_close(rms_norm(x, hf.weight, 1e-5), hf(x), atol=0 if exact else 1e-6,
                                   rtol=0 if exact else 1e-6)


def test_handing_back_pages_keeps_every_value(tmp_path):
    from safetensors.torch import load_file, save_file

    save_file({"w": torch.randn(300, 1000)}, tmp_path / "w.safetensors")
    mapped = load_file(tmp_path / "w.safetensors")["w"]  # file-backed pages
    anonymous = torch.randn(300, 1000)
    for tensor in (mapped, anonymous):
        before = tensor.clone()
        hand_back_pages(tensor)
        assert torch.equal(tensor, before)


BLOCK_SIZE, HEADS, KV_HEADS, DIM = 4, 6, 2, 8  # the attention tests' small model shape


def random_pages(seed: int, num_blocks: int) -> PagedKVCache:
    """One layer of pages (blocks of 4 tokens, 2 K/V heads of 8 dims) filled with seeded random K/V."""
    torch.manual_seed(seed)
    cache = PagedKVCache(1, num_blocks, BLOCK_SIZE, KV_HEADS, DIM, torch.float32, "cpu")
    cache.data.normal_()
    return cache


def assert_each_equals_attending_alone(batched, q, cache, tables, lens) -> None:
    """Each request's row of a batched decode == plain SDPA over its own context, read through its table."""
    for i, (table, n) in enumerate(zip(tables, lens)):
        k, v = cache[0].read(torch.tensor(table), n)
        alone = F.scaled_dot_product_attention(q[i:i + 1].transpose(0, 1)[None], k.transpose(0, 1)[None],
                                               v.transpose(0, 1)[None], scale=0.3, enable_gqa=True)
        torch.testing.assert_close(batched[i], alone[0].transpose(0, 1)[0], atol=1e-5, rtol=1e-5)


def test_batched_decode_attention_equals_one_request_at_a_time():
    block_size, heads, dim = BLOCK_SIZE, HEADS, DIM
    cache = random_pages(seed=0, num_blocks=16)
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
    assert meta.decode.key_mask[:, 0].tolist() == [[True] * 3 + [False], [True] + [False] * 3]
    assert meta.decode.slots is None  # nothing shared: each request a group of its own, in its own place
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


def test_openmp_sleeps_on_a_busy_machine_unless_the_threads_were_given_their_cores(monkeypatch):
    monkeypatch.setattr(host.os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    env: dict[str, str] = {}
    host.tune_host(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    given = {"PREFIXLAB_NUM_THREADS": "2"}  # `prefixlab serve --threads 2`
    host.tune_host(given)
    assert "OMP_WAIT_POLICY" not in given
    monkeypatch.setattr(host.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    quiet: dict[str, str] = {}
    host.tune_host(quiet)
    assert quiet == {}


def test_decodes_sharing_their_context_read_it_once_and_equal_one_request_at_a_time():
    block_size, heads, dim = BLOCK_SIZE, HEADS, DIM
    cache = random_pages(seed=1, num_blocks=32)
    prefix = [3, 7, 1, 12, 5]  # a shared system prompt: five full blocks
    tables = [prefix + [20], prefix + [21, 22], prefix + [9], prefix]
    lens = [22, 27, 21, 19]  # the last ends inside the shared prefix's last block
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], block_size, "cpu")
    assert meta.decode is not None and meta.decode.shared_blocks is not None  # the union path was taken
    assert meta.decode.shared_blocks.tolist() == sorted(set(prefix + [20, 21, 22, 9]))
    assert meta.decode.span_start is None  # blocks 1 .. 22 would be more than twice the union: gathered
    q = torch.randn(4, heads, dim)
    batched = decode_attention(q, cache[0], meta.decode, scale=0.3)
    assert_each_equals_attending_alone(batched, q, cache, tables, lens)


def test_decodes_sharing_a_run_of_consecutive_blocks_read_it_in_place():
    block_size, heads, dim = BLOCK_SIZE, HEADS, DIM
    cache = random_pages(seed=2, num_blocks=32)
    prefix = [4, 5, 6, 7, 8, 9, 10]  # a fresh pool hands out consecutive blocks
    tables = [prefix + [11], prefix + [13, 14], prefix + [15]]  # block 12 belongs to someone else
    lens = [31, 36, 30]
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], block_size, "cpu")
    assert meta.decode is not None and meta.decode.span_start == 4
    assert meta.decode.shared_blocks is not None and meta.decode.shared_blocks.tolist() == list(range(4, 16))
    q = torch.randn(3, heads, dim)
    batched = decode_attention(q, cache[0], meta.decode, scale=0.3)
    assert_each_equals_attending_alone(batched, q, cache, tables, lens)  # block 12's keys stay masked out


def test_a_chunk_after_a_prefix_in_a_run_of_blocks_reads_it_in_place_with_the_same_result():
    block_size, heads, kv_heads, dim = BLOCK_SIZE, HEADS, KV_HEADS, DIM
    cache = random_pages(seed=4, num_blocks=32)
    # A cached prefix in blocks 5-9 and 11, the chunk ending in block 12 (block 10 is someone else's):
    # 22 cached tokens, 3 new, the last one at position 24.
    chunk = ([5, 6, 7, 8, 9, 11, 12], 22, 3)
    seq = AttentionMetadata.build([chunk], block_size, "cpu").seqs[0]
    assert seq.span == (5, 8) and seq.mask is not None and seq.mask.shape == (3, 8 * block_size)
    q, k, v = torch.randn(3, heads, dim), torch.randn(3, kv_heads, dim), torch.randn(3, kv_heads, dim)
    cache[0].write(k, v, AttentionMetadata.build([chunk], block_size, "cpu").slot_mapping)
    in_place = prefill_attention(q, k, v, cache[0], seq, scale=0.3)
    context = torch.arange(25)  # what a gather through the table reads: positions 0-24
    gathered = replace(seq, span=None, mask=context[None, :] <= torch.arange(22, 25)[:, None], biases={})
    torch.testing.assert_close(in_place, prefill_attention(q, k, v, cache[0], gathered, scale=0.3), atol=1e-6, rtol=1e-6)
    assert AttentionMetadata.build([([5, 29, 2], 8, 3)], block_size, "cpu").seqs[0].span is None  # scattered: gathered


def test_decodes_with_little_in_common_keep_the_padded_gather():
    tables = [[1, 2, 3], [14, 15, 16], [27, 28, 29]]  # scattered: no run of consecutive blocks either
    meta = AttentionMetadata.build([(t, 10, 1) for t in tables], block_size=4, device="cpu")
    assert meta.decode is not None and meta.decode.shared_blocks is None and meta.decode.block_tables is not None


def test_decodes_in_groups_sharing_a_prefix_read_each_prefix_once_and_equal_one_request_at_a_time():
    block_size, heads, dim = BLOCK_SIZE, HEADS, DIM
    cache = random_pages(seed=5, num_blocks=64)
    first, second = [30, 3, 17, 8], [41, 12, 25, 36]  # two system prompts, scattered over the pool
    # Requests of the two prompts interleaved, three and two of them, and one sharing nothing.
    tables = [first + [50], second + [44], first + [5, 60], [21, 2, 55, 56, 57], second + [9], first + [27]]
    lens = [18, 20, 23, 19, 17, 19]
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], block_size, "cpu")
    decode = meta.decode
    assert decode is not None and decode.shared_blocks is None and decode.block_tables is not None
    assert decode.slots_per_group == 3 and decode.slots is not None
    unions = [sorted(set(row.tolist()) - {0}) for row in decode.block_tables]
    assert unions == [sorted(first + [50, 5, 60, 27]), sorted(second + [44, 9]), sorted([21, 2, 55, 56, 57])]
    assert decode.slots.tolist() == [0, 3, 1, 6, 4, 2]  # group * 3 + place in its group
    q = torch.randn(len(tables), heads, dim)
    batched = decode_attention(q, cache[0], decode, scale=0.3)
    assert torch.isfinite(batched).all()
    assert_each_equals_attending_alone(batched, q, cache, tables, lens)


def test_decodes_of_two_prefixes_in_one_run_of_blocks_are_attended_in_two_groups():
    block_size, heads, dim = BLOCK_SIZE, HEADS, DIM
    cache = random_pages(seed=6, num_blocks=32)
    first, second = [1, 2, 3, 4], [5, 6, 7, 8]  # a fresh pool: every block in one run
    tables = [first + [9], second + [10], first + [11], second + [12]]
    lens = [18, 19, 17, 20]
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], block_size, "cpu")
    decode = meta.decode
    # One run would make every query score both prompts' keys; two groups score only their own prompt.
    assert decode is not None and decode.shared_blocks is None and decode.block_tables is not None
    assert decode.block_tables.tolist() == [first + [9, 11], second + [10, 12]]
    q = torch.randn(len(tables), heads, dim)
    assert_each_equals_attending_alone(decode_attention(q, cache[0], decode, scale=0.3), q, cache, tables, lens)
