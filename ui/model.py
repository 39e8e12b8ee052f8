"""The real model in the app: weights loaded once per server, an engine (own KV pool) per session.

Weights are read-only during a forward pass, so every browser session can share one copy
(``st.cache_resource``). The KV cache is what a session writes, so each session builds its
own :class:`~engine.llm_engine.LLMEngine` around the shared weights, with a modest pool.

Sharing fairly (one server, a room of students): every session's pool is a partition of one
page tensor of :data:`~teaching.limits.SHARED_KV_BUDGET_MIB`, and the sessions' steps are merged
into one forward pass at a time (:func:`step_batcher`; ten students generating cost one batched
pass per token, not ten). The weights, the pages and the passes live in a worker process
(:mod:`engine.runtime.worker`) on all cores but :data:`~teaching.limits.PAGE_CORES`: in the server's
own process a pass would wait for the GIL behind every page script. A session may start a few
requests back to back, then one per :data:`~teaching.limits.SESSION_REFILL_S`.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import streamlit as st

from engine.config import DEFAULT_MODEL, EngineConfig
from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine
from teaching import limits

if TYPE_CHECKING:  # torch is imported only when a page asks for the model
    from engine.model.weights import ModelShape
    from engine.runtime.batching import BatchedBackend, StepBatcher

#: KV memory per session: small enough for many students on one server and for the pool to fit
#: on screen (32 MiB = 45 blocks of 16 tokens for SmolLM2 in fp32), big enough for a few chats.
SESSION_KV_MIB = 32
#: Prefill chunk of one Playground step: a merged forward pass stays short (~0.1-0.5 s on CPU).
SESSION_BATCHED_TOKENS = 512


@st.cache_resource(show_spinner=False)
def _batchers() -> dict[int, StepBatcher]:
    """One batcher (shared KV pages, merged forward passes) per loaded model of this server, by ``id``."""
    return {}


_BATCHERS_LOCK = threading.Lock()


def step_batcher(model: ModelShape) -> StepBatcher:
    """The batcher every session engine on ``model`` runs through, with the server's KV budget
    (the one :func:`shared_model` made with its worker process, or one in this process)."""
    from engine.model.weights import ModelWeights
    from engine.runtime.batching import StepBatcher
    from engine.runtime.executor import InProcessExecutor

    batchers = _batchers()
    with _BATCHERS_LOCK:
        batcher = batchers.get(id(model))
        if batcher is None or batcher.model is not model:
            if not isinstance(model, ModelWeights):
                raise PrefixLabError("This model runs in a worker process that this server did not start.")
            batcher = batchers[id(model)] = StepBatcher(InProcessExecutor(model, limits.SHARED_KV_BUDGET_MIB))
    return batcher


def _tokens(state: Any, key: str) -> tuple[float, float]:
    """(requests this session may start now, the time that was computed at): a token bucket."""
    now = time.monotonic()
    tokens, then = state.get(key, (float(limits.SESSION_BURST), now))
    return min(float(limits.SESSION_BURST), tokens + (now - then) / limits.SESSION_REFILL_S), now


def check_rate(state: Any, key: str = "_model_rate") -> None:
    """Refuse a request when this session has used its burst; see :func:`note_request`."""
    tokens, _ = _tokens(state, key)
    if tokens < 1:
        wait = (1 - tokens) * limits.SESSION_REFILL_S
        raise PrefixLabError(f"Slow down: the model is shared by the whole room. Try again in {wait:.0f} s.")


def note_request(state: Any, key: str = "_model_rate") -> None:
    """Count one started request against this session's burst (refused ones do not count)."""
    tokens, now = _tokens(state, key)
    state[key] = (tokens - 1, now)


def tune_page_server() -> None:
    """The app server's Python, set for a room (process-wide; ``app.py`` calls it on every run, a no-op once set).

    * The GIL changes hands every 1 ms instead of 5: a room runs a script thread per rerun, and each of
      their many short system calls (a message to the event loop per element drawn) then waits for the GIL
      again; so does the event loop, which serves every session. A burst of twenty lab reruns queued the
      whole server for a second.
    * Young garbage collections every 20,000 allocations instead of 700: a room's sessions allocate a lot
      that lives (timelines, figures, logs), and every full collection walked it again holding the GIL,
      for up to 0.4 s (25 full collections in a 60 s load test; 6 with this).

    Measured with ``bench.load_test``; the numbers are in docs/benchmarks.md.
    """
    if sys.getswitchinterval() != limits.SERVER_SWITCH_INTERVAL_S:
        sys.setswitchinterval(limits.SERVER_SWITCH_INTERVAL_S)
    if gc.get_threshold()[0] != limits.SERVER_GC_THRESHOLD:
        gc.set_threshold(limits.SERVER_GC_THRESHOLD, *gc.get_threshold()[1:])


Progress = Callable[[float, str], None]


@st.cache_resource(show_spinner=False)
def _model_slot(name: str) -> dict[str, Any]:
    """One slot per model name per server. The load itself happens outside this cached function,
    because a cached function may not draw into a progress bar created outside it."""
    return {"lock": threading.Lock(), "model": None, "worker": None}


def shared_model(name: str = DEFAULT_MODEL, progress: Progress | None = None) -> ModelShape:
    """The server's model, once per server process: its weights and KV pages in a worker process
    (:mod:`engine.runtime.worker`), what sessions need to know about it here.

    ``progress`` reports the loader's steps; only the first caller loads (and may convert the
    GGUF, ~30 s), the others wait on the lock and get the same object.
    """
    from engine.runtime.batching import StepBatcher
    from engine.runtime.worker import WorkerExecutor

    slot = _model_slot(name)
    with slot["lock"]:
        if slot["model"] is None:
            worker = WorkerExecutor(name, None, "auto", limits.SHARED_KV_BUDGET_MIB, progress,
                                    threads=max(1, (os.cpu_count() or 1) - limits.PAGE_CORES))
            model = worker.model
            with _BATCHERS_LOCK:  # sessions take rows of the worker's pages (here only their shape)
                _batchers()[id(model)] = StepBatcher(worker)
            slot["model"], slot["worker"] = model, worker
            # The server's many long-lived Python objects: out of the cyclic GC's reach, so no
            # collection walks them again (see .streamlit/config.toml).
            gc.collect()
            gc.freeze()
    return slot["model"]


def session_engine(weights: ModelShape, *, enable_prefix_caching: bool = True, kv_mib: int = SESSION_KV_MIB,
                   block_size: int = 16, config: EngineConfig | None = None) -> LLMEngine:
    """A fresh engine on the shared weights with ``kv_mib`` MiB of the server's KV pages: its own pool,
    scheduler and sampler; its forward passes merged with every other session's (:func:`step_batcher`)."""
    from engine.runtime.batching import BatchedBackend

    base = config or EngineConfig(enable_prefix_caching=enable_prefix_caching, block_size=block_size)
    # ``config`` (when given) wins over the two keyword shortcuts.
    base = replace(base, max_num_batched_tokens=min(base.max_num_batched_tokens, SESSION_BATCHED_TOKENS),
                   kv_cache_memory_mib=kv_mib)
    return LLMEngine(base, backend=BatchedBackend(base, step_batcher(weights)))


def session_backend(config: EngineConfig) -> BatchedBackend:
    """A back end on the server's model with ``config``'s KV budget, for an engine a page builds itself
    (a lesson's measurement): its passes merged with every session's, like :func:`session_engine`'s."""
    from engine.runtime.batching import BatchedBackend

    return BatchedBackend(config, step_batcher(shared_model()))
