"""Time to first token with the prefix cache on and off, for a lesson's chat prompts.

A lesson may list a system prompt and a few user questions (front-matter key ``measure``).
This module sends them one at a time, first to an engine with prefix caching and then to
one without, and reports for each request how many prompt tokens came from the cache and
its median TTFT. It takes any back end: the real model (``engine.model.ModelBackend``)
when it is available, or the simulator in tests.
"""

from __future__ import annotations

import importlib.util
import statistics
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from engine.simulator import SimulatorBackend


@dataclass(frozen=True)
class MeasureSpec:
    """What to send: one system prompt shared by every request, one question per request."""

    system: str
    questions: tuple[str, ...]
    block_size: int = 16
    repeats: int = 3


@dataclass(frozen=True)
class TTFTRow:
    """One request: its size, what the cache gave it, and its TTFT with the cache on and off."""

    question: str
    prompt_tokens: int
    cached_tokens: int
    ttft_on_ms: float
    ttft_off_ms: float

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


def _prompt(backend: Any, system: str, question: str) -> Any:
    """A chat when the back end has a chat template (the real model), plain text otherwise."""
    if hasattr(backend, "apply_chat_template"):
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return f"{system} {question}"


def measure_ttft(spec: MeasureSpec, backend: Any) -> list[TTFTRow]:
    """Send the questions one at a time, cache on then off, ``spec.repeats`` rounds; medians per request.

    Each round starts fresh engines on the same back end (the weights load once), so the first
    request always finds a cold cache and later ones can hit the system prompt.
    """
    kind = "simulator" if isinstance(backend, SimulatorBackend) else "model"
    # One untimed request first: the first forward pass pays for lazy initialisation.
    warm_up = LLMEngine(EngineConfig(backend=kind, block_size=spec.block_size, enable_prefix_caching=False), backend=backend)
    warm_up.generate([_prompt(backend, spec.system, spec.questions[0])], SamplingParams(max_tokens=1))
    ttfts: dict[bool, list[list[float]]] = {True: [], False: []}
    cached: list[int] = []
    sizes: list[int] = []
    for _ in range(spec.repeats):
        for caching in (True, False):
            config = EngineConfig(backend=kind, block_size=spec.block_size, enable_prefix_caching=caching)
            engine = LLMEngine(config, backend=backend)
            round_ttfts = []
            for question in spec.questions:
                out = engine.generate([_prompt(backend, spec.system, question)], SamplingParams(max_tokens=1))[0]
                round_ttfts.append((out.metrics.ttft or 0.0) * 1000)
                if caching and len(cached) < len(spec.questions):
                    cached.append(out.num_cached_tokens)
                    sizes.append(out.metrics.num_prompt_tokens)
            ttfts[caching].append(round_ttfts)
    return [
        TTFTRow(
            question, sizes[i], cached[i],
            statistics.median(r[i] for r in ttfts[True]), statistics.median(r[i] for r in ttfts[False]),
        )
        for i, question in enumerate(spec.questions)
    ]
