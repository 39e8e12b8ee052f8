"""Our forward pass for the Llama family (Llama, SmolLM2, Qwen2, Mistral), on the HF model's weights.

Per layer: RMSNorm -> q/k/v projections -> RoPE -> paged attention -> o projection -> residual,
then RMSNorm -> SwiGLU MLP (``down(silu(gate(x)) * up(x))``) -> residual. Tokens of every request
in the step are packed into one ``[num_tokens, hidden]`` matrix, so every matmul outside attention
runs once for the whole batch. q/k/v are stacked into one matrix at load time (as vLLM's
``QKVParallelLinear`` does): one matmul instead of three. gate/up stay apart: stacking them too
made a copy of 2/3 of the weights (the HF model's own tensors stay mapped from the file), which
cost ~0.2 GiB of resident memory for a gain too small to measure here.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from engine.errors import ConfigError
from engine.model.attention import AttentionMetadata, paged_attention
from engine.model.kv_tensors import PagedKVCache
from engine.model.layers import RotaryEmbedding, attention_scale, fuse_rows, linear, rms_norm


@dataclass
class LlamaLayerWeights:
    """One decoder layer's weights, with q/k/v stacked into one matrix."""

    input_norm: torch.Tensor
    qkv: torch.Tensor  # [(n_heads + 2 * n_kv_heads) * head_dim, hidden]
    qkv_bias: torch.Tensor | None  # Qwen2 has q/k/v biases
    o_proj: torch.Tensor
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate: torch.Tensor
    gate_bias: torch.Tensor | None
    up: torch.Tensor
    up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


#: Stacked q/k/v weights per HF model, made once: engines sharing a model share these too.
_STACKED: weakref.WeakKeyDictionary[Any, list[LlamaLayerWeights]] = weakref.WeakKeyDictionary()


def stacked_weights(hf_model: Any) -> list[LlamaLayerWeights]:
    if hf_model not in _STACKED:
        layers = []
        for layer in hf_model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv_modules = [attn.q_proj, attn.k_proj, attn.v_proj]
            qkv = fuse_rows(qkv_modules)
            assert qkv is not None  # every nn.Linear has a weight
            layers.append(LlamaLayerWeights(
                input_norm=layer.input_layernorm.weight,
                qkv=qkv, qkv_bias=fuse_rows(qkv_modules, "bias"),
                o_proj=attn.o_proj.weight, o_bias=attn.o_proj.bias,
                post_norm=layer.post_attention_layernorm.weight,
                gate=mlp.gate_proj.weight, gate_bias=mlp.gate_proj.bias, up=mlp.up_proj.weight, up_bias=mlp.up_proj.bias,
                down=mlp.down_proj.weight, down_bias=mlp.down_proj.bias,
            ))
        _STACKED[hf_model] = layers
    return _STACKED[hf_model]


class LlamaForward:
    def __init__(self, hf_model: Any, max_model_len: int) -> None:
        config = hf_model.config
        if getattr(config, "hidden_act", "silu") != "silu":
            raise ConfigError(f"Llama-family MLP with activation {config.hidden_act!r} is not supported (silu is).")
        self.model = hf_model.model  # embed_tokens, layers, norm
        self.lm_head = hf_model.get_output_embeddings()  # the embedding matrix itself when tied
        self.num_layers = config.num_hidden_layers
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.eps = config.rms_norm_eps
        self.scale = attention_scale(self.head_dim)
        self.rope = RotaryEmbedding(config, self.head_dim, max_model_len, self.lm_head.weight.device)
        self.layers = stacked_weights(hf_model)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_cache: PagedKVCache) -> torch.Tensor:
        """Hidden states ``[num_tokens, hidden]`` of the packed new tokens (after the final norm)."""
        x = self.model.embed_tokens.weight[input_ids]
        n = x.shape[0]
        heads, kv_heads = self.num_heads, self.num_kv_heads
        cos, sin = self.rope.cos_sin(positions, x.dtype)  # the same for every layer
        for i, w in enumerate(self.layers):
            h = rms_norm(x, w.input_norm, self.eps)
            qkv = F.linear(h, w.qkv, w.qkv_bias).view(n, heads + 2 * kv_heads, self.head_dim)
            qk = self.rope.rotate(qkv[:, :heads + kv_heads], cos, sin)  # q and k heads rotated together
            o = paged_attention(qk[:, :heads], qk[:, heads:], qkv[:, heads + kv_heads:], kv_cache[i], meta, self.scale)
            x = x + F.linear(o.reshape(n, -1), w.o_proj, w.o_bias)

            h = rms_norm(x, w.post_norm, self.eps)
            gated = F.silu(F.linear(h, w.gate, w.gate_bias)) * F.linear(h, w.up, w.up_bias)
            x = x + F.linear(gated, w.down, w.down_bias)
        return rms_norm(x, self.model.norm.weight, self.eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return linear(hidden, self.lm_head)
