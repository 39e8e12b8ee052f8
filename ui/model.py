"""The real model in the app: weights loaded once per server, an engine (own KV pool) per session.

Weights are read-only during a forward pass, so every browser session can share one copy
(``st.cache_resource``). The KV cache is what a session writes, so each session builds its
own :class:`~engine.llm_engine.LLMEngine` around the shared weights, with a modest pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import streamlit as st

from engine.config import DEFAULT_MODEL, EngineConfig
from engine.llm_engine import LLMEngine

#: KV memory per session: small enough for many students on one server and for the pool to fit
#: on screen (32 MiB = 45 blocks of 16 tokens for SmolLM2 in fp32), big enough for a few chats.
SESSION_KV_MIB = 32

Progress = Callable[[float, str], None]


@st.cache_resource(show_spinner=False)
def _model_slot(name: str) -> dict[str, Any]:
    """One slot per model name per server. The load itself happens outside this cached function,
    because a cached function may not draw into a progress bar created outside it."""
    return {"lock": threading.Lock(), "model": None}


def shared_model(name: str = DEFAULT_MODEL, progress: Progress | None = None) -> Any:
    """The loaded model's shared weights (``engine.model.weights.ModelWeights``), once per server process.

    ``progress`` reports the loader's steps; only the first caller loads (and may convert the
    GGUF, ~30 s), the others wait on the lock and get the same object.
    """
    from engine.model.loader import load_model
    from engine.model.runner import pick_device, pick_dtype
    from engine.model.weights import ModelWeights

    slot = _model_slot(name)
    with slot["lock"]:
        if slot["model"] is None:
            device = pick_device("auto")
            slot["model"] = ModelWeights(load_model(name, pick_dtype(None, device), device, progress))
    return slot["model"]


def session_engine(weights: Any, *, enable_prefix_caching: bool = True, kv_mib: int = SESSION_KV_MIB,
                   block_size: int = 16, config: EngineConfig | None = None) -> LLMEngine:
    """A fresh engine (its own back end, so its own KV pages) on the shared weights, with ``kv_mib`` MiB of KV memory."""
    from engine.model.runner import ModelBackend

    base = config or EngineConfig(enable_prefix_caching=enable_prefix_caching, block_size=block_size)
    # ``config`` (when given) wins over the two keyword shortcuts.
    backend = ModelBackend(base, weights=weights)
    num_blocks = max(2, kv_mib * 2**20 // (backend.kv_bytes_per_token * base.block_size))
    return LLMEngine(replace(base, num_blocks=num_blocks, kv_cache_memory_mib=kv_mib), backend=backend)
