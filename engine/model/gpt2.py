"""Our forward pass for GPT-2, on the HF model's weights.

Differences from Llama worth noticing: learned position embeddings added to the input (no RoPE),
LayerNorm with bias, one fused q/k/v projection, a GELU MLP, and as many K/V heads as query heads.
HF stores GPT-2's projections as ``Conv1D`` with weights ``[in, out]``: ``y = x @ W + b``, the
transpose of ``nn.Linear``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from engine.errors import ConfigError
from engine.model.attention import AttentionMetadata, paged_attention
from engine.model.kv_tensors import PagedKVCache
from engine.model.layers import attention_scale, gelu_new


def conv1d(x: torch.Tensor, module: Any) -> torch.Tensor:
    """HF's GPT-2 ``Conv1D``: ``x @ W + b`` with ``W`` stored ``[in, out]``."""
    return torch.addmm(module.bias, x, module.weight)


class GPT2Forward:
    def __init__(self, hf_model: Any, max_model_len: int) -> None:
        config = hf_model.config
        if getattr(config, "scale_attn_by_inverse_layer_idx", False) or getattr(config, "reorder_and_upcast_attn", False):
            raise ConfigError("GPT-2 variants with scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported.")
        if config.activation_function not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ConfigError(f"GPT-2 activation {config.activation_function!r} is not supported (gelu_new is).")
        self.transformer = hf_model.transformer  # wte, wpe, h, ln_f
        self.lm_head = hf_model.get_output_embeddings()
        self.num_layers = config.n_layer
        self.num_heads = self.num_kv_heads = config.n_head
        self.head_dim = config.n_embd // config.n_head
        self.eps = config.layer_norm_epsilon
        self.scale = attention_scale(self.head_dim) if getattr(config, "scale_attn_weights", True) else 1.0

    def _layer_norm(self, x: torch.Tensor, ln: Any) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, self.eps)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_cache: PagedKVCache) -> torch.Tensor:
        t = self.transformer
        x = t.wte.weight[input_ids] + t.wpe.weight[positions]
        n, hidden = x.shape
        for i, block in enumerate(t.h):
            h = self._layer_norm(x, block.ln_1)
            q, k, v = conv1d(h, block.attn.c_attn).split(hidden, dim=-1)
            shape = (n, self.num_heads, self.head_dim)
            o = paged_attention(q.reshape(shape), k.reshape(shape), v.reshape(shape), kv_cache[i], meta, self.scale)
            x = x + conv1d(o.reshape(n, hidden), block.attn.c_proj)
            h = self._layer_norm(x, block.ln_2)
            x = x + conv1d(gelu_new(conv1d(h, block.mlp.c_fc)), block.mlp.c_proj)
        return self._layer_norm(x, t.ln_f)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.lm_head.weight, getattr(self.lm_head, "bias", None))
