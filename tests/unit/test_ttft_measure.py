"""TTFT measuring: several rounds on fresh engines, the median and the spread of each request."""

from __future__ import annotations

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.simulator import SimulatorBackend
from teaching.pages.ttft import TtftSample, measure_ttft, speedup


def test_measure_takes_the_median_of_several_rounds_on_fresh_engines() -> None:
    backend = SimulatorBackend()
    made = []

    def make_engine(caching: bool) -> LLMEngine:
        made.append(caching)
        return LLMEngine(EngineConfig(backend="simulator", block_size=4, enable_prefix_caching=caching), backend=backend)

    prompts = ["s1 s2 s3 s4 s5 s6 s7 s8 q1", "s1 s2 s3 s4 s5 s6 s7 s8 q2"]
    samples = measure_ttft(make_engine, prompts, repeats=3)
    assert len(made) == 6  # two fresh engines per round
    assert len(samples) == 4 and all(len(s.runs_s) == 3 for s in samples)
    for s in samples:
        assert s.low_s <= s.ttft_s <= s.high_s
    second_on = next(s for s in samples if s.request == 2 and s.caching)
    assert second_on.cached_tokens == 8  # the shared prefix came from the cache in every round


def test_speedup_reports_the_median_round_and_the_spread() -> None:
    samples = [
        TtftSample(1, False, 1.0, 0, 150, runs_s=(1.0, 1.0, 1.0)),
        TtftSample(1, True, 1.0, 0, 150, runs_s=(1.0, 1.0, 1.0)),
        TtftSample(2, False, 1.0, 0, 150, runs_s=(1.0, 0.9, 1.8)),
        TtftSample(2, True, 0.5, 128, 150, runs_s=(0.5, 0.9, 1.0)),
    ]
    result = speedup(samples)
    assert result is not None and result.rounds == 3
    assert (result.low, result.median, result.high) == (1.0, 1.8, 2.0)
