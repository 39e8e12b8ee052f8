"""Our forward pass for the Llama family (Llama, SmolLM2, Qwen2, Mistral), on the HF model's weights.

Per layer: RMSNorm -> q/k/v projections -> RoPE -> paged attention -> o projection -> residual,
then RMSNorm -> SwiGLU MLP (``down(silu(gate(x)) * up(x))``) -> residual. Tokens of every request
in the step are packed into one ``[num_tokens, hidden]`` matrix, so every matmul outside attention
runs once for the whole batch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from engine.errors import ConfigError
from engine.model.attention import AttentionMetadata, paged_attention
from engine.model.kv_tensors import PagedKVCache
from engine.model.layers import RotaryEmbedding, attention_scale, linear, rms_norm


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

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_cache: PagedKVCache) -> torch.Tensor:
        """Hidden states ``[num_tokens, hidden]`` of the packed new tokens (after the final norm)."""
        x = self.model.embed_tokens.weight[input_ids]
        n = x.shape[0]
        for i, layer in enumerate(self.model.layers):
            attn = layer.self_attn
            h = rms_norm(x, layer.input_layernorm.weight, self.eps)
            q = self.rope(linear(h, attn.q_proj).view(n, self.num_heads, self.head_dim), positions)
            k = self.rope(linear(h, attn.k_proj).view(n, self.num_kv_heads, self.head_dim), positions)
            v = linear(h, attn.v_proj).view(n, self.num_kv_heads, self.head_dim)
            o = paged_attention(q, k, v, kv_cache[i], meta, self.scale)
            x = x + linear(o.reshape(n, -1), attn.o_proj)

            mlp = layer.mlp
            h = rms_norm(x, layer.post_attention_layernorm.weight, self.eps)
            x = x + linear(F.silu(linear(h, mlp.gate_proj)) * linear(h, mlp.up_proj), mlp.down_proj)
        return rms_norm(x, self.model.norm.weight, self.eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return linear(hidden, self.lm_head)
