"""Our forward pass for the Llama family (Llama, SmolLM2, Qwen2, Mistral), on the HF model's weights.

Per layer: RMSNorm -> q/k/v projections -> RoPE -> paged attention -> o projection -> residual,
then RMSNorm -> SwiGLU MLP (``down(silu(gate(x)) * up(x))``) -> residual. Tokens of every request
in the step are packed into one ``[num_tokens, hidden]`` matrix, so every matmul outside attention
runs once for the whole batch. Every projection is a :class:`~engine.model.layers.Projection`
made once at load time (q/k/v stacked into one); in a decode step on the CPU the residual
additions and the MLP's gating are done as the matmul writes its result; the HF model
keeps its own weights as the tests' oracle. gate and up stay two projections: stacked, the
elementwise steps that follow read strided halves, measured ~20% slower for a long prefill.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch

from engine.errors import ConfigError
from engine.kv_cache.kv_cache_spec import layer_pattern_from_hf_config
from engine.model.attention import AttentionMetadata, paged_attention
from engine.model.kv_tensors import PagedKVCache
from engine.model.layers import Projection, RotaryEmbedding, attention_scale, rms_norm


@dataclass
class LlamaLayerWeights:
    """One decoder layer's projections, q/k/v stacked into one."""

    input_norm: torch.Tensor
    qkv: Projection  # out: (n_heads + 2 * n_kv_heads) * head_dim
    o_proj: Projection
    post_norm: torch.Tensor
    gate: Projection
    up: Projection
    down: Projection


@dataclass
class LlamaProjections:
    """Every projection of the model, packed once per HF model: engines sharing a model share these."""

    layers: list[LlamaLayerWeights]
    lm_head: Projection


_PROJECTIONS: weakref.WeakKeyDictionary[Any, LlamaProjections] = weakref.WeakKeyDictionary()


def projections(hf_model: Any) -> LlamaProjections:
    if hf_model not in _PROJECTIONS:
        layers = [LlamaLayerWeights(
            input_norm=layer.input_layernorm.weight,
            qkv=Projection([layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj]),
            o_proj=Projection([layer.self_attn.o_proj]),
            post_norm=layer.post_attention_layernorm.weight,
            gate=Projection([layer.mlp.gate_proj]),
            up=Projection([layer.mlp.up_proj]),
            down=Projection([layer.mlp.down_proj]),
        ) for layer in hf_model.model.layers]
        lm_head = hf_model.get_output_embeddings()
        tied = lm_head.weight.data_ptr() == hf_model.get_input_embeddings().weight.data_ptr()
        _PROJECTIONS[hf_model] = LlamaProjections(layers, Projection([lm_head], hand_back=not tied))
    return _PROJECTIONS[hf_model]


class LlamaForward:
    def __init__(self, hf_model: Any, max_model_len: int) -> None:
        config = hf_model.config
        if getattr(config, "hidden_act", "silu") != "silu":
            raise ConfigError(f"Llama-family MLP with activation {config.hidden_act!r} is not supported (silu is).")
        self.model = hf_model.model  # embed_tokens, layers, norm
        self.num_layers = config.num_hidden_layers
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.eps = config.rms_norm_eps
        self.scale = attention_scale(self.head_dim)
        self.rope = RotaryEmbedding(config, self.head_dim, max_model_len, self.model.embed_tokens.weight.device)
        packed = projections(hf_model)
        self.layers, self.logits_projection = packed.layers, packed.lm_head
        # Each layer's sliding window as the config declares it (Qwen2 layer_types, Mistral
        # sliding_window), None for full attention. The cache keeps every block (one group, like
        # vLLM with its hybrid manager disabled); only the attention masks change.
        self.layer_windows = layer_pattern_from_hf_config(config) or [None] * self.num_layers

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_cache: PagedKVCache) -> torch.Tensor:
        """Hidden states ``[num_tokens, hidden]`` of the packed new tokens (after the final norm)."""
        x = self.model.embed_tokens.weight[input_ids]
        n = x.shape[0]
        heads, kv_heads = self.num_heads, self.num_kv_heads
        cos, sin = self.rope.cos_sin(positions, x.dtype)  # the same for every layer
        for i, w in enumerate(self.layers):
            h = rms_norm(x, w.input_norm, self.eps)
            qkv = w.qkv(h).view(n, heads + 2 * kv_heads, self.head_dim)
            qk = self.rope.rotate(qkv[:, :heads + kv_heads], cos, sin)  # q and k heads rotated together
            layer_meta = meta.for_window(self.layer_windows[i])
            o = paged_attention(qk[:, :heads], qk[:, heads:], qkv[:, heads + kv_heads:], kv_cache[i], layer_meta, self.scale)
            x = w.o_proj.add_to(o.reshape(n, -1), x)

            h = rms_norm(x, w.post_norm, self.eps)
            x = w.down.add_to(w.up.times(h, w.gate.silu(h)), x)
        return rms_norm(x, self.model.norm.weight, self.eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.logits_projection(hidden)
