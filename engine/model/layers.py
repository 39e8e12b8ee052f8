"""Small building blocks shared by the model families: norms, rotary embeddings, activations."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from engine.errors import ConfigError
from engine.model.host_memory import hand_back_pages


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm (Llama): scale by 1/RMS in fp32, then by a learned weight; no mean, no bias.

    torch's fused kernel reads the row once instead of once per elementwise step (0.7 ms vs 1.4 ms
    for a 1,000-token prefill here) and gives the same fp32 numbers as HF's step-by-step version.
    In other dtypes HF normalises in fp32 and rounds before scaling; so do we.
    """
    if x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


def onednn_packs_linear(weight: torch.Tensor) -> bool:
    """Whether oneDNN can pre-pack this weight: fp32 on a CPU whose torch was built with it."""
    return (weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class Projection:
    """``x @ W.T + b`` for one ``nn.Linear``, or for several stacked by output row (q/k/v, as vLLM's
    ``QKVParallelLinear``): one matmul instead of several, and the input is read once.

    On CPU the weight is pre-packed once into oneDNN's blocked layout (as vLLM's CPU build does).
    A decode step multiplies only a few rows by every weight; torch's default matmul then re-packs
    each weight on every call and reads it well under the memory bandwidth. Measured here with 8
    rows: the MLP's gate and up together 0.34 ms packed vs 0.57 ms plain, the LM head 4.6 vs 9.1 ms.
    With one row oneDNN is slower (~30% on the MLP): a batch-1 decode step lost ~15%.
    Sums come out in another order (differences ~1e-7 relative), which greedy decoding of the
    tests' models and prompts does not notice. oneDNN also applies an elementwise "post-op" to the
    result before writing it (:meth:`add_to`, :meth:`times`: the same numbers as a separate torch
    op; :meth:`silu`), without another pass over memory. Elsewhere (GPU, other dtypes) the plain
    weight is used.

    The HF model keeps its own weights untouched: it is the tests' oracle. ``hand_back``: whether our
    forward pass never reads the modules' weights otherwise (a tied LM head is also the embedding).
    """

    def __init__(self, modules: list[Any], hand_back: bool = True) -> None:
        weights = [m.weight.detach() for m in modules]
        has_bias = any(getattr(m, "bias", None) is not None for m in modules)
        self.bias = torch.cat([m.bias.detach() if getattr(m, "bias", None) is not None else w.new_zeros(w.shape[0])
                               for m, w in zip(modules, weights)]) if has_bias else None
        weight = weights[0] if len(weights) == 1 else torch.cat(weights)
        self.packed: torch.Tensor | None = None
        self.weight: torch.Tensor | None = weight
        if onednn_packs_linear(weight):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
            self.weight = None  # the stacked copy is no longer needed (a single module's stays the HF's)
            for w in weights if hand_back else []:
                hand_back_pages(w)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        assert self.weight is not None
        return F.linear(x, self.weight, self.bias)

    def silu(self, x: torch.Tensor) -> torch.Tensor:
        """``silu(projection(x))`` (oneDNN's "swish" rounds the last bit differently from torch's SiLU)."""
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "swish", [], "")
        return F.silu(self(x))

    def add_to(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """``residual + projection(x)``: a residual connection."""
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise.binary(x, residual, self.packed, self.bias, "add")
        return residual + self(x)

    def times(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``projection(x) * other``: a gated unit (SwiGLU's ``up(x) * silu(gate(x))``)."""
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise.binary(x, other, self.packed, self.bias, "mul")
        return self(x) * other


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
        cos, sin = angles.cos() * scaling, angles.sin() * scaling
        self.cos = torch.cat([cos, cos], dim=-1).to(device)  # the two halves share angles
        # "Rotate half" multiplies the second half by -sin: the sign lives in the table, not in each step.
        self.signed_sin = torch.cat([-sin, sin], dim=-1).to(device)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The angles of ``positions``, shaped to broadcast over heads: look them up once per step."""
        return self.cos[positions].unsqueeze(1).to(dtype), self.signed_sin[positions].unsqueeze(1).to(dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` (``[num_tokens, heads, head_dim]``) by angles from :meth:`cos_sin`:
        ``x * cos + (-x2, x1) * sin``, bit for bit (negating before or after a product is exact)."""
        half = x.shape[-1] // 2
        swapped = torch.cat([x[..., half:], x[..., :half]], dim=-1)
        return x * cos + swapped * signed_sin

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` (``[num_tokens, heads, head_dim]``) to the given positions."""
        return self.rotate(x, *self.cos_sin(positions, x.dtype))


def attention_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
