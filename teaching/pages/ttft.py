"""Time to first token with the prefix cache off and on: one measuring loop for every caller.

Each prompt runs alone with ``max_tokens=1``, so its TTFT is its prefill, on two engines that
differ only in ``enable_prefix_caching`` and take turns. TTFT is the engine's own reading, from
the moment the scheduler picks the request to its first token (``RequestMetrics.scheduled_ttft``),
so nothing outside the engine (a page redraw) is counted. One reading on a busy CPU can be off by
half; the workload is played ``repeats`` times on fresh engines and each request reports the
median and the spread. The Compare page and the lessons both use it; so both report numbers
measured the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.llm_engine import LLMEngine, Prompt
from engine.request import SamplingParams

WARM_UP_PROMPT = "Hello"  # shares no block with a real workload, so it does not warm the cache
DEFAULT_REPEATS = 5  # rounds per measurement: enough for a median that a noisy CPU does not swing
MAX_REPEATS = 20  # more rounds add little and keep a shared server busy


@dataclass(frozen=True)
class TtftSample:
    """Time to first token of one request, with caching on or off, over several rounds.

    ``ttft_s`` and ``prefill_s`` are medians; ``runs_s`` keeps every round's TTFT for the spread.
    """

    request: int  # 1-based position in the workload
    caching: bool
    ttft_s: float
    cached_tokens: int
    prompt_tokens: int
    runs_s: tuple[float, ...] = ()
    #: The token it produced: with greedy sampling, caching must not change it.
    first_token: int | None = None
    prefill_s: float = 0.0  # median time in the model's forward passes for the prompt

    @property
    def low_s(self) -> float:
        return min(self.runs_s, default=self.ttft_s)

    @property
    def high_s(self) -> float:
        return max(self.runs_s, default=self.ttft_s)


def _one_round(
    make_engine: Callable[[bool], LLMEngine],
    prompts: Sequence[Prompt],
    tick: Callable[[str], None],
) -> list[tuple[int, bool, float, float, int, int, int | None]]:
    """Fresh engines, a warm-up each, then every prompt alone with caching off and on."""
    engines = {False: make_engine(False), True: make_engine(True)}
    params = SamplingParams(max_tokens=1)
    for engine in engines.values():
        engine.generate([WARM_UP_PROMPT], params)
    readings = []
    for index, prompt in enumerate(prompts):
        for caching in (False, True):
            tick(f"request {index + 1} of {len(prompts)}, caching {'on' if caching else 'off'}")
            output = engines[caching].generate([prompt], params)[0]
            metrics = output.metrics
            assert metrics is not None, "LLMEngine.generate always fills metrics"
            readings.append((index + 1, caching, metrics.scheduled_ttft or 0.0, metrics.prefill_time,
                             metrics.num_cached_tokens, metrics.num_prompt_tokens,
                             output.token_ids[0] if output.token_ids else None))
    return readings


def measure_ttft(
    make_engine: Callable[[bool], LLMEngine],
    prompts: Sequence[Prompt],
    progress: Callable[[float, str], None] | None = None,
    repeats: int = DEFAULT_REPEATS,
) -> list[TtftSample]:
    """TTFT of each prompt with caching off and on: the median of ``repeats`` rounds, with its spread.

    Every round starts fresh engines from ``make_engine(caching)`` (the first request always finds a
    cold cache), and a warm-up request per engine keeps one-off start-up costs out of the numbers.
    """
    repeats = max(1, min(int(repeats), MAX_REPEATS))
    total = 2 * len(prompts) * repeats
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        if progress is not None:
            progress(done / total, f"round {done // (2 * len(prompts)) + 1} of {repeats}: {what}")
        done += 1

    rounds = [_one_round(make_engine, prompts, tick) for _ in range(repeats)]
    if progress is not None:
        progress(1.0, "done")
    samples = []
    for position, first in enumerate(rounds[0]):
        request, caching, _, _, cached, prompt_tokens, first_token = first
        ttfts = tuple(r[position][2] for r in rounds)
        samples.append(TtftSample(
            request=request, caching=caching, ttft_s=statistics.median(ttfts), cached_tokens=cached,
            prompt_tokens=prompt_tokens, runs_s=ttfts, first_token=first_token, prefill_s=statistics.median(r[position][3] for r in rounds),
        ))
    return samples


@dataclass(frozen=True)
class Speedup:
    """How much sooner the first token came with caching on: the median round and the spread."""

    median: float
    low: float
    high: float
    rounds: int


def speedup(samples: Sequence[TtftSample]) -> Speedup | None:
    """Mean TTFT off / mean TTFT on over the requests after the first (which cannot hit), per round.

    One ratio per round, so the spread shows how far a single reading could have misled.
    """
    later = [s for s in samples if s.request > 1]
    off = [s for s in later if not s.caching]
    on = [s for s in later if s.caching]
    if not off or not on:
        return None
    rounds = min(len(s.runs_s) or 1 for s in later)
    ratios = []
    for r in range(rounds):
        on_mean = statistics.fmean((s.runs_s or (s.ttft_s,))[r] for s in on)
        off_mean = statistics.fmean((s.runs_s or (s.ttft_s,))[r] for s in off)
        if on_mean > 0:
            ratios.append(off_mean / on_mean)
    if not ratios:
        return None
    return Speedup(statistics.median(ratios), min(ratios), max(ratios), len(ratios))
