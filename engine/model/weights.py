"""``ModelWeights``: what engines may share, the read-only half of the model back end.

A forward pass only *reads* the weights, so one copy can serve any number of engines (one
per browser session, a cache-on and a cache-off engine side by side). What a forward pass
*writes* is the KV cache, and that belongs to exactly one engine: each
:class:`~engine.model.runner.ModelBackend` allocates its own pages once, for the engine
that owns it. Share a ``ModelWeights``, never a ``ModelBackend``.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from engine.model.gpt2 import GPT2Forward
from engine.model.host_memory import reuse_freed_activations
from engine.model.kv_tensors import PagedKVCache
from engine.model.llama import LlamaForward
from engine.model.loader import LoadedModel
from engine.model.packing import PackedStep
from engine.model.tokenizer import TextTokenizer


def context_length(config: object) -> int:
    """Longest sequence the model handles. A sliding window does not cap it: the forward pass masks
    each windowed layer's attention to its window (see LlamaForward.layer_windows)."""
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 2048


def model_forward(hf_model: object, max_model_len: int) -> LlamaForward | GPT2Forward:
    """Our forward pass for the model's architecture (the loader already checked it is supported)."""
    if hf_model.config.model_type == "gpt2":  # type: ignore[attr-defined]
        return GPT2Forward(hf_model, max_model_len)
    return LlamaForward(hf_model, max_model_len)


class KVLayout(NamedTuple):
    """The shape of one token's K/V: what the KV pages are made of."""

    num_layers: int
    num_kv_heads: int
    head_dim: int

    def bytes_per_token(self, dtype: torch.dtype) -> int:
        """K and V, every layer: 2 x layers x kv_heads x head_dim x bytes per element."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * torch.empty((), dtype=dtype).element_size()


class ModelShape(Protocol):
    """What an engine reads about its model, wherever the weights are: here (:class:`ModelWeights`) or in a
    worker process (:class:`~engine.runtime.worker.WorkerModel`). No forward pass: that is the runtime's."""

    @property
    def device(self) -> torch.device: ...
    @property
    def dtype(self) -> torch.dtype: ...
    @property
    def tokenizer(self) -> TextTokenizer | None: ...
    @property
    def eos_token_ids(self) -> set[int]: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def kv_layout(self) -> KVLayout: ...
    @property
    def kv_bytes_per_token(self) -> int: ...


class ModelWeights:
    """A loaded model and our forward pass over it; holds no per-request or per-engine state."""

    def __init__(self, loaded: LoadedModel) -> None:
        reuse_freed_activations()
        self.loaded = loaded
        self.hf_model = loaded.hf_model  # kept for its weights (and as the tests' oracle)
        parameter = next(self.hf_model.parameters())
        self.device: torch.device = parameter.device  # the weights decide where the pages go
        self.dtype: torch.dtype = parameter.dtype
        self.tokenizer = None if loaded.tokenizer is None else TextTokenizer(loaded.tokenizer)
        self.eos_token_ids = loaded.eos_token_ids
        self.vocab_size: int = self.hf_model.config.vocab_size
        self.max_model_len = context_length(self.hf_model.config)
        self.model = model_forward(self.hf_model, self.max_model_len)

    @property
    def kv_layout(self) -> KVLayout:
        return KVLayout(self.model.num_layers, self.model.num_kv_heads, self.model.head_dim)

    @property
    def kv_bytes_per_token(self) -> int:
        return self.kv_layout.bytes_per_token(self.dtype)

    def logits(self, step: PackedStep, kv_cache: PagedKVCache) -> torch.Tensor:
        """One forward pass over ``step`` (writing its K/V into ``kv_cache``): the float32 logits of its
        sampling rows, ``[rows, vocab]`` (``[0, vocab]`` when no request samples)."""
        hidden = self.model.forward(step.input_ids, step.positions, step.meta, kv_cache)
        if not step.sampling_rows:
            return hidden.new_zeros((0, self.vocab_size), dtype=torch.float32)
        rows = torch.tensor(step.sampling_rows, dtype=torch.long, device=self.device)
        return self.model.compute_logits(hidden[rows]).float()
