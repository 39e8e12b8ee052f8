"""Time to first token with the prefix cache on and off, for a lesson's chat prompts.

A lesson may list a system prompt and a few user questions (front-matter key ``measure``).
This module sends them one at a time to engines with and without prefix caching (the loop of
:mod:`teaching.ttft`, shared with the Compare page) and reports for each request how many prompt
tokens came from the cache and its median TTFT. It takes any back end: the real model (``engine.model.ModelBackend``)
when it is available, or the simulator in tests.
"""

from __future__ import annotations

import importlib.util
import statistics
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.simulator import SimulatorBackend
from teaching.ttft import measure_ttft as measure_ttft_samples


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
    """Send the questions one at a time, cache on and off, ``spec.repeats`` rounds; medians per request.

    Each round starts fresh engines on the same back end (the weights load once), so the first
    request always finds a cold cache and later ones can hit the system prompt.
    """
    kind = "simulator" if isinstance(backend, SimulatorBackend) else "model"

    def make_engine(caching: bool) -> LLMEngine:
        config = EngineConfig(backend=kind, block_size=spec.block_size, enable_prefix_caching=caching)
        return LLMEngine(config, backend=backend)

    prompts = [_prompt(backend, spec.system, question) for question in spec.questions]
    rounds = [measure_ttft_samples(make_engine, prompts) for _ in range(spec.repeats)]

    def median_ms(index: int, caching: bool) -> float:
        return statistics.median(1000 * s.ttft_s for r in rounds for s in r if s.request == index + 1 and s.caching == caching)

    first = {s.request: s for s in rounds[0] if s.caching}
    return [
        TTFTRow(question, first[i + 1].prompt_tokens, first[i + 1].cached_tokens, median_ms(i, True), median_ms(i, False))
        for i, question in enumerate(spec.questions)
    ]
