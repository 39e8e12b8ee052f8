"""Small building blocks shared by the model families: norms, rotary embeddings, activations."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from engine.errors import ConfigError
from engine.model.host_memory import hand_back_pages
from engine.model.native import SMALL_BATCH_ROWS, kernels_for, small_batch_linear
from engine.model.native import rms_norm as native_rms_norm


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm (Llama): scale by 1/RMS in fp32, then by a learned weight; no mean, no bias.

    In fp32 on the CPU the kernel in :mod:`engine.model.native` does it in one call: torch's
    version is five elementwise ops, ~60 us for a decode step's 8 rows, 61 norms a step. Elsewhere
    torch's, which gives the same fp32 numbers as HF's step-by-step version. In other dtypes HF
    normalises in fp32 and rounds before scaling; so do we.
    """
    if x.dtype == torch.float32:
        if kernels_for(x.device, x.dtype) and weight.dtype == torch.float32:
            return native_rms_norm(x, weight, eps)
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


class Projection:
    """``x @ W.T + b`` for one ``nn.Linear``, or for several stacked by output row (q/k/v, as vLLM's
    ``QKVParallelLinear``): one matmul instead of several, and the input is read once.

    A decode step multiplies a few rows (one per request) by every weight: on the CPU in fp32 that
    goes to :func:`~engine.model.native.small_batch_linear`, which streams the weight once at close
    to the memory's bandwidth and applies the op that follows (:meth:`silu`, :meth:`add_to`,
    :meth:`times`) while the result is still in registers. Measured here, the five projections of
    30 layers with 8 rows, weights not in cache: ~22 ms instead of ~28 ms with oneDNN's pre-packed
    weights and ~38 ms with torch's ``linear``. Longer batches (prefills) go to oneDNN's blocked
    GEMM on the same weights, with the op that follows fused into it, as vLLM's CPU build does:
    torch's ``linear`` (MKL) ran 1.2-1.4x slower at 256 rows on an AMD EPYC (on the machine the
    kernels were first tuned on, oneDNN's pre-packed weights were no faster than it). Sums come out in another order than torch's
    (differences ~1e-6 relative), which greedy decoding of the tests' models and prompts does not
    notice. Elsewhere (GPU, other dtypes, no C compiler) torch's ops do everything.

    On the CPU the weight is copied once into this process's own memory (on huge pages, see
    :mod:`engine.runtime.huge_pages`); the HF model keeps its own weights untouched: it is the
    tests' oracle. ``hand_back``: whether our forward pass never reads the modules' weights otherwise
    (a tied LM head is also the embedding), so their pages can go back to the OS.
    """

    def __init__(self, modules: list[Any], hand_back: bool = True) -> None:
        weights = [m.weight.detach() for m in modules]
        has_bias = any(getattr(m, "bias", None) is not None for m in modules)
        self.bias = torch.cat([m.bias.detach() if getattr(m, "bias", None) is not None else w.new_zeros(w.shape[0])
                               for m, w in zip(modules, weights)]) if has_bias else None
        self.weight = weights[0] if len(weights) == 1 else torch.cat(weights)
        self.native = kernels_for(self.weight.device, self.weight.dtype)
        self.onednn = _onednn_for(self.weight)
        if self.native:
            self.weight = self.weight.clone() if len(weights) == 1 else self.weight
            for w in weights if hand_back else []:
                hand_back_pages(w)

    def _small(self, x: torch.Tensor) -> bool:
        return self.native and x.shape[0] <= SMALL_BATCH_ROWS

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._then(x, "none")

    def silu(self, x: torch.Tensor) -> torch.Tensor:
        """``silu(projection(x))``."""
        return self._then(x, "silu")

    def add_to(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """``residual + projection(x)``: a residual connection."""
        return self._then(x, "add", residual)

    def times(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``projection(x) * other``: a gated unit (SwiGLU's ``up(x) * silu(gate(x))``)."""
        return self._then(x, "mul", other)

    def _then(self, x: torch.Tensor, op: str, other: torch.Tensor | None = None) -> torch.Tensor:
        """The projection followed by ``op`` (see :data:`engine.model.native.OPS`), on the path that suits ``x``."""
        if self._small(x):
            return small_batch_linear(x, self.weight, self.bias, op, other)
        if self.onednn:
            if other is None:
                return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, _ONEDNN_ACTIVATION[op], [], "")
            return torch.ops.mkldnn._linear_pointwise.binary(x, other, self.weight, self.bias, op)
        y = F.linear(x, self.weight, self.bias)
        if other is None:  # none or silu
            return F.silu(y) if op == "silu" else y
        return other + y if op == "add" else y * other


#: oneDNN's names for the activations a projection may end with (the op torch's compiler emits for
#: CPU linears, ``mkldnn._linear_pointwise``; ``add`` and ``mul`` take its ``binary`` form).
_ONEDNN_ACTIVATION = {"none": "none", "silu": "swish"}


def _onednn_for(weight: torch.Tensor) -> bool:
    """Whether prefills may take oneDNN's matmul: fp32 weights on a CPU build of torch that has it."""
    return (weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


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
