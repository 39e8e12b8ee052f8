"""Time to first token with the prefix cache on and off, for a lesson's chat prompts.

A lesson may list a system prompt and a few user questions (front-matter key ``measure``).
This module sends them one at a time to engines with and without prefix caching (the loop of
:mod:`teaching.pages.ttft`, shared with the Compare page) and reports for each request how many prompt
tokens came from the cache and its median TTFT over several rounds, with the spread. It runs
on the real model's shared weights (:class:`engine.model.weights.ModelWeights`) when it is
available, or on the simulator in tests. Every engine gets its own back end and so its own KV
pages: engines share weights, never pages.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine, Prompt
from engine.simulator import SimulatorBackend
from teaching.pages.ttft import DEFAULT_REPEATS
from teaching.pages.ttft import measure_ttft as measure_ttft_samples

#: KV memory of each measuring engine on the real model: a lesson's chats are a few hundred tokens.
MEASURE_KV_MIB = 32


@dataclass(frozen=True)
class MeasureSpec:
    """What to send: one system prompt shared by every request, one question per request."""

    system: str
    questions: tuple[str, ...]
    block_size: int = 16
    repeats: int = DEFAULT_REPEATS


@dataclass(frozen=True)
class TTFTRow:
    """One request: its size, what the cache gave it, and its TTFT with the cache on and off."""

    question: str
    prompt_tokens: int
    cached_tokens: int
    ttft_on_ms: float  # medians over the rounds
    ttft_off_ms: float
    #: First (greedy) token with the cache on and off: equal, or the cache served wrong K/V.
    first_token_on: int | None = None
    first_token_off: int | None = None
    on_range_ms: tuple[float, float] = (0.0, 0.0)  # lowest and highest round
    off_range_ms: tuple[float, float] = (0.0, 0.0)
    prefill_on_ms: float = 0.0  # median forward-pass time of the prompt
    prefill_off_ms: float = 0.0

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens the model had to run with the cache on (the rest came from the cache)."""
        return self.prompt_tokens - self.cached_tokens

    @property
    def speedup(self) -> float:
        return self.ttft_off_ms / self.ttft_on_ms if self.ttft_on_ms > 0 else float("nan")


def real_model_available() -> bool:
    """True when this build has the model back end (engine.model) and torch to run it."""
    return importlib.util.find_spec("engine.model") is not None and importlib.util.find_spec("torch") is not None


def engine_factory(spec: MeasureSpec, model: Any,
                   backend_for: Callable[[EngineConfig], Any] | None = None) -> tuple[Callable[[bool], LLMEngine], bool]:
    """``make_engine(caching)`` for ``model``, and whether prompts should be chats.

    ``model`` is the real model's ``ModelWeights`` (a ``ModelBackend`` lends its weights, never
    its pages), or ``None`` / a ``SimulatorBackend`` for the simulator. Each engine gets a new
    back end, so a cache-off engine can never overwrite the cache-on engine's KV pages.
    ``backend_for(config)`` makes that back end where ``ModelBackend`` on the weights will not do
    (a server's model, whose passes run in its worker process); ``model`` then only describes it.
    """
    if model is None or isinstance(model, SimulatorBackend):
        def make_simulated(caching: bool) -> LLMEngine:
            return LLMEngine(EngineConfig(backend="simulator", block_size=spec.block_size, enable_prefix_caching=caching))
        return make_simulated, False
    from engine.model import ModelBackend

    weights = getattr(model, "weights", model)

    def make_real(caching: bool) -> LLMEngine:
        config = EngineConfig(backend="model", block_size=spec.block_size, enable_prefix_caching=caching,
                              kv_cache_memory_mib=MEASURE_KV_MIB)
        return LLMEngine(config, backend=backend_for(config) if backend_for else ModelBackend(config, weights=weights))
    tokenizer = weights.tokenizer
    return make_real, bool(tokenizer is not None and tokenizer.chat_template)


def _prompt(chat: bool, system: str, question: str) -> Prompt:
    """A chat when the model has a chat template (the real model), plain text otherwise."""
    if chat:
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return f"{system} {question}"


def measure_ttft(spec: MeasureSpec, model: Any = None,
                 backend_for: Callable[[EngineConfig], Any] | None = None) -> list[TTFTRow]:
    """Send the questions one at a time, cache on and off, ``spec.repeats`` rounds; medians per request.

    Each round starts fresh engines on the same weights (they load once), so the first request
    always finds a cold cache and later ones can hit the system prompt. ``backend_for``: see
    :func:`engine_factory`.
    """
    make_engine, chat = engine_factory(spec, model, backend_for)
    prompts = [_prompt(chat, spec.system, question) for question in spec.questions]
    samples = measure_ttft_samples(make_engine, prompts, repeats=spec.repeats)
    on = {s.request: s for s in samples if s.caching}
    off = {s.request: s for s in samples if not s.caching}
    return [
        TTFTRow(question, on[i].prompt_tokens, on[i].cached_tokens, 1000 * on[i].ttft_s, 1000 * off[i].ttft_s,
                first_token_on=on[i].first_token, first_token_off=off[i].first_token,
                on_range_ms=(1000 * on[i].low_s, 1000 * on[i].high_s),
                off_range_ms=(1000 * off[i].low_s, 1000 * off[i].high_s),
                prefill_on_ms=1000 * on[i].prefill_s, prefill_off_ms=1000 * off[i].prefill_s)
        for i, question in enumerate(spec.questions, start=1)
    ]
