"""Time to first token with the prefix cache off and on: one measuring loop for every caller.

Each prompt runs alone with ``max_tokens=1``, so its TTFT is its prefill, on two engines that
differ only in ``enable_prefix_caching`` and take turns. The Compare page and the lessons both
use it; so both report numbers measured the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.llm_engine import LLMEngine, Prompt
from engine.request import SamplingParams

WARM_UP_PROMPT = "Hello"  # shares no block with a real workload, so it does not warm the cache


@dataclass(frozen=True)
class TtftSample:
    """Time to first token of one request, with caching on or off."""

    request: int  # 1-based position in the workload
    caching: bool
    ttft_s: float
    cached_tokens: int
    prompt_tokens: int
    #: The token it produced: with greedy sampling, caching must not change it.
    first_token: int | None = None


def measure_ttft(
    make_engine: Callable[[bool], LLMEngine],
    prompts: Sequence[Prompt],
    progress: Callable[[float, str], None] | None = None,
) -> list[TtftSample]:
    """TTFT of each prompt with caching off and on, on two fresh engines from ``make_engine(caching)``.

    A warm-up request per engine first keeps one-off start-up costs (lazy initialisation of
    the first forward pass) out of the numbers.
    """
    engines = {False: make_engine(False), True: make_engine(True)}
    params = SamplingParams(max_tokens=1)
    for engine in engines.values():
        engine.generate([WARM_UP_PROMPT], params)
    samples: list[TtftSample] = []
    total = 2 * len(prompts)
    for index, prompt in enumerate(prompts):
        for caching in (False, True):
            if progress is not None:
                progress(len(samples) / total, f"request {index + 1} of {len(prompts)}, caching {'on' if caching else 'off'}")
            output = engines[caching].generate([prompt], params)[0]
            metrics = output.metrics
            assert metrics is not None, "LLMEngine.generate always fills metrics"
            samples.append(TtftSample(
                request=index + 1, caching=caching, ttft_s=metrics.ttft or 0.0,
                cached_tokens=metrics.num_cached_tokens, prompt_tokens=metrics.num_prompt_tokens,
                first_token=output.token_ids[0] if output.token_ids else None,
            ))
    if progress is not None:
        progress(1.0, "done")
    return samples
