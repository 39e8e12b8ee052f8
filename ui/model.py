"""The real model in the app: weights loaded once per server, an engine (own KV pool) per session.

Weights are read-only during a forward pass, so every browser session can share one copy
(``st.cache_resource``). The KV cache is what a session writes, so each session builds its
own :class:`~engine.llm_engine.LLMEngine` around the shared weights, with a modest pool.

Sharing fairly (one server, a room of students): every forward pass takes a turn on the one
model (:func:`model_turn`, first come first served per *step*, so a long answer cannot starve
a short one), every session's pool is drawn from one KV budget (:class:`KVBudget`), and a
session may start a few requests back to back, then one per :data:`~teaching.limits.SESSION_REFILL_S`.
"""

from __future__ import annotations

import gc
import itertools
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import streamlit as st

from engine.config import DEFAULT_MODEL, EngineConfig
from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine
from teaching import limits

#: KV memory per session: small enough for many students on one server and for the pool to fit
#: on screen (32 MiB = 45 blocks of 16 tokens for SmolLM2 in fp32), big enough for a few chats.
SESSION_KV_MIB = 32
#: Prefill chunk of a Playground step: one turn on the shared model stays short (~0.1-0.5 s on CPU).
SESSION_BATCHED_TOKENS = 512


class FairTurns:
    """The shared model's queue: one step at a time, first come first served, first tokens first.

    ``threading.Lock`` wakes an arbitrary waiter, so a busy session could take turn after turn;
    here every session that wants the model waits at most one step of every other. A step that
    computes a request's first token (``first=True``: its prefill) goes ahead of decode steps, so a
    student who just pressed Send sees text after a step or two, not after a round of everyone's
    decode steps (what vLLM gets by batching prefills with decodes; here each session has its own
    engine, so the turns are interleaved instead).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._tickets = itertools.count()
        self._queues: tuple[deque[int], deque[int]] = (deque(), deque())  # first tokens, then the rest
        self._busy = False
        self.waiting = 0

    def _head(self) -> int | None:
        first, rest = self._queues
        return first[0] if first else rest[0] if rest else None

    @contextmanager
    def turn(self, first: bool = False) -> Iterator[None]:
        with self._cond:
            ticket = next(self._tickets)
            queue = self._queues[0 if first else 1]
            queue.append(ticket)
            self.waiting += 1
            while self._busy or self._head() != ticket:
                self._cond.wait()
            queue.popleft()
            self._busy = True
            self.waiting -= 1
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class KVBudget:
    """KV memory for every session together; a session's pool is returned when its engine is dropped."""

    def __init__(self, total_mib: int) -> None:
        self.total_mib = total_mib
        self.used_mib = 0
        self._lock = threading.Lock()

    def reserve(self, mib: int, owner: object) -> None:
        """Take ``mib`` for ``owner`` (an engine) until it is garbage; raises when the budget is spent."""
        with self._lock:
            if self.used_mib + mib > self.total_mib:
                raise PrefixLabError(
                    f"The server's KV memory for the Playground is taken ({self.used_mib} of {self.total_mib} MiB "
                    f"in use by other students). Pick a smaller KV pool, or try again in a minute."
                )
            self.used_mib += mib
        weakref.finalize(owner, self._release, mib)

    def _release(self, mib: int) -> None:
        with self._lock:
            self.used_mib -= mib


@st.cache_resource(show_spinner=False)
def model_turns() -> FairTurns:
    """The one queue for the model, shared by every session of this server."""
    return FairTurns()


@st.cache_resource(show_spinner=False)
def kv_budget() -> KVBudget:
    return KVBudget(limits.SHARED_KV_BUDGET_MIB)


@contextmanager
def model_turn(first: bool = False) -> Iterator[None]:
    """Hold the shared model for one step (a forward pass): ``with model_turn(): engine.step()``.

    ``first``: the step computes a request's first token (see :class:`FairTurns`).
    """
    with model_turns().turn(first):
        yield


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
            # The model's many Python objects live as long as the server: move them out of the
            # cyclic GC's reach, so no collection ever walks them again (see .streamlit/config.toml).
            gc.collect()
            gc.freeze()
            # A forward pass hands the GIL back and forth at every tensor op; with a room of lab
            # sessions running Python in other threads, each hand-back waits up to the switch
            # interval (5 ms by default), which multiplies a step's time. A shorter one keeps it near.
            sys.setswitchinterval(limits.MODEL_SWITCH_INTERVAL_S)
    return slot["model"]


def session_engine(weights: Any, *, enable_prefix_caching: bool = True, kv_mib: int = SESSION_KV_MIB,
                   block_size: int = 16, config: EngineConfig | None = None) -> LLMEngine:
    """A fresh engine (its own back end, so its own KV pages) on the shared weights, with ``kv_mib`` MiB of KV memory."""
    from engine.model.runner import ModelBackend

    base = config or EngineConfig(enable_prefix_caching=enable_prefix_caching, block_size=block_size)
    # ``config`` (when given) wins over the two keyword shortcuts.
    base = replace(base, max_num_batched_tokens=min(base.max_num_batched_tokens, SESSION_BATCHED_TOKENS))
    backend = ModelBackend(base, weights=weights)
    num_blocks = max(2, kv_mib * 2**20 // (backend.kv_bytes_per_token * base.block_size))
    engine = LLMEngine(replace(base, num_blocks=num_blocks, kv_cache_memory_mib=kv_mib), backend=backend)
    kv_budget().reserve(kv_mib, engine)
    return engine
