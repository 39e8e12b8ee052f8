"""The CPU kernels (engine/model/cpu_kernels.c) against the PyTorch ops they replace: the same numbers,
up to the order of float sums, for every shape the model families give them."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.model import native
from engine.model.attention import AttentionMetadata, decode_attention
from tests.model.test_fast_paths import (
    BLOCK_SIZE,
    DIM,
    HEADS,
    KV_HEADS,
    assert_each_equals_attending_alone,
    random_pages,
)

pytestmark = pytest.mark.skipif(not native.kernels_for("cpu", torch.float32),
                                reason="the CPU kernels did not build here (no C compiler)")


@pytest.mark.parametrize("rows", [1, 3, 4, 8, 9, 32])
@pytest.mark.parametrize("outputs", [24, 27])  # weight rows in pairs, and an odd last one
@pytest.mark.parametrize("inputs", [48, 40])  # whole 16-float vectors, and a width that goes row by row
def test_small_batch_linear_equals_torch_with_each_op(rows, outputs, inputs):
    torch.manual_seed(rows * 100 + outputs)
    x, weight, bias = torch.randn(rows, inputs), torch.randn(outputs, inputs), torch.randn(outputs)
    other = torch.randn(rows, outputs)
    plain = F.linear(x, weight, bias)
    close = {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(native.small_batch_linear(x, weight, bias), plain, **close)
    torch.testing.assert_close(native.small_batch_linear(x, weight), F.linear(x, weight), **close)
    torch.testing.assert_close(native.small_batch_linear(x, weight, bias, "silu"), F.silu(plain), **close)
    torch.testing.assert_close(native.small_batch_linear(x, weight, bias, "add", other), other + plain, **close)
    torch.testing.assert_close(native.small_batch_linear(x, weight, bias, "mul", other), plain * other, **close)


def test_small_batch_linear_reads_a_strided_input_as_its_values():
    x = torch.randn(4, 80)[:, ::2]  # not contiguous
    weight = torch.randn(8, 40)
    torch.testing.assert_close(native.small_batch_linear(x, weight), F.linear(x, weight), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rows", [1, 8, 100])  # 100: threads split the rows
def test_rms_norm_equals_torch(rows):
    torch.manual_seed(rows)
    x, weight = torch.randn(rows, 2, 576)[:, 1] * 3, torch.randn(576)  # a strided input
    torch.testing.assert_close(native.rms_norm(x, weight, 1e-5), F.rms_norm(x, (576,), weight, 1e-5),
                               atol=1e-5, rtol=1e-5)


def kernel_rows(q, cache, tables, lens, window=None):
    meta = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], BLOCK_SIZE, "cpu",
                                   sliding_window=window, decode_kernel=True)
    assert meta.decode is not None and meta.decode.context_lens is not None
    return decode_attention(q, cache[0], meta.decode, scale=0.3)


def test_paged_decode_attention_equals_attending_each_request_alone():
    cache = random_pages(seed=0, num_blocks=16)
    tables, lens = [[3, 7, 1], [5], [2, 9, 11, 4], [3, 7, 12]], [10, 2, 16, 9]  # two share blocks 3 and 7
    q = torch.randn(4, HEADS, DIM)
    assert_each_equals_attending_alone(kernel_rows(q, cache, tables, lens), q, cache, tables, lens)


@pytest.mark.parametrize("window", [3, 5, 100])
def test_paged_decode_attention_keeps_to_a_sliding_window(window):
    cache = random_pages(seed=1, num_blocks=16)
    tables, lens = [[3, 7, 1], [2, 9, 11, 4]], [10, 16]
    q = torch.randn(2, HEADS, DIM)
    reference = AttentionMetadata.build([(t, n - 1, 1) for t, n in zip(tables, lens)], BLOCK_SIZE, "cpu",
                                        sliding_window=window)
    assert reference.decode is not None
    torch.testing.assert_close(kernel_rows(q, cache, tables, lens, window),
                               decode_attention(q, cache[0], reference.decode, scale=0.3), atol=1e-5, rtol=1e-5)


def test_paged_decode_attention_with_one_query_head_per_kv_head_and_one_token_pages():
    torch.manual_seed(2)
    pages = torch.randn(2, 1, 40, 1, KV_HEADS, DIM)  # block size 1, as a server's shared pages
    k, v = pages[0, 0], pages[1, 0]
    rows = [[5, 6, 7, 30, 31], [12, 2]]
    q = torch.randn(2, KV_HEADS, DIM)
    tables = torch.tensor([rows[0], rows[1] + [0, 0, 0]])
    out = native.paged_decode_attention(q, k, v, tables, torch.tensor([5, 2]), None, 0.3)
    for i, table in enumerate(rows):
        keys, values = k[table, 0].transpose(0, 1), v[table, 0].transpose(0, 1)
        alone = F.scaled_dot_product_attention(q[i][:, None], keys, values, scale=0.3)[:, 0]
        torch.testing.assert_close(out[i], alone, atol=1e-5, rtol=1e-5)
