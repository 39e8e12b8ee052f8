"""Small building blocks shared by the model families: norms, rotary embeddings, activations."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from engine.errors import ConfigError


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm (Llama): scale by 1/RMS in fp32, then by a learned weight; no mean, no bias."""
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


def linear(x: torch.Tensor, module: Any) -> torch.Tensor:
    """``x @ W.T + b`` with an ``nn.Linear``'s weights (bias optional, as in Qwen2's q/k/v)."""
    return F.linear(x, module.weight, module.bias)


def fuse_rows(modules: list[Any], name: str = "weight") -> torch.Tensor | None:
    """One tensor holding several projections' ``name`` (weight or bias) stacked by output row.

    One matmul over the stacked weight replaces several small ones (q/k/v): fewer calls, and the
    input is read once. Each module's parameter becomes a view into the stacked tensor, so the HF
    model (the tests' oracle) computes with the same numbers and holds no second copy (the file
    it was mapped from may stay resident until the OS needs the pages).
    Returns None when the modules have no such parameter (a bias-free projection).
    """
    found = [getattr(m, name, None) for m in modules]
    params = [p for p in found if p is not None]
    if len(params) < len(modules):
        return None
    fused = torch.cat([p.detach() for p in params])
    offset = 0
    for p in params:
        rows = p.shape[0]
        p.data = fused[offset:offset + rows]
        offset += rows
    return fused


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU, the tanh approximation."""
    return F.gelu(x, approximate="tanh")


class RotaryEmbedding:
    """Rotary position embedding (RoPE), the "rotate half" layout HF Llama/Qwen2/Mistral use.

    Each pair of dimensions (i, i + head_dim/2) of q and k is rotated by the angle
    ``position * inv_freq[i]``. Because it depends only on the position, a token's K can be
    cached once and reused by any later query: RoPE is what makes KV caching valid.
    """

    def __init__(self, config: Any, head_dim: int, max_positions: int, device: torch.device | str) -> None:
        params = dict(getattr(config, "rope_parameters", None) or {})
        rope_type = params.get("rope_type", params.get("type", "default"))
        theta = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        scaling = 1.0
        if rope_type == "default":
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        elif rope_type in ("linear", "llama3", "yarn"):
            # Frequency rescalings for long contexts: the formulas live in transformers.
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
            inv_freq = inv_freq.float()
        else:
            raise ConfigError(f"RoPE type {rope_type!r} is not supported (default, linear, llama3, yarn are).")
        positions = torch.arange(max_positions, dtype=torch.float32)
        angles = torch.outer(positions, inv_freq)  # [positions, head_dim/2]
        angles = torch.cat([angles, angles], dim=-1)  # the two halves share angles
        self.cos = (angles.cos() * scaling).to(device)
        self.sin = (angles.sin() * scaling).to(device)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The angles of ``positions``, shaped to broadcast over heads: look them up once per step."""
        return self.cos[positions].unsqueeze(1).to(dtype), self.sin[positions].unsqueeze(1).to(dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` (``[num_tokens, heads, head_dim]``) by angles from :meth:`cos_sin`."""
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` (``[num_tokens, heads, head_dim]``) to the given positions."""
        return self.rotate(x, *self.cos_sin(positions, x.dtype))


def attention_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
