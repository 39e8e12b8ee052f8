"""The Compare page's logic without Streamlit: one workload, several cache settings, numbers out.

A workload is played on the simulator (instant) once per setting: caching off, the vLLM free
rule, the classic free rule. Each run reports what the prefix cache saved. The real-model
timing (TTFT with caching on vs off) is :func:`teaching.pages.ttft.measure_ttft`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from engine.events import BlockRemoved
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from engine.vllm_versions import DEFAULT_VLLM_VERSION, FREE_POLICY_VERSIONS
from teaching.scenarios.scenario import run_scenario

#: (key, label, enable_prefix_caching, vllm_version), in the order the charts show them. The keys
#: and labels name the free rule ("classic" is 0.23's); the release is the engine's one knob.
SETTINGS: tuple[tuple[str, str, bool, str], ...] = (
    ("off", "caching off", False, DEFAULT_VLLM_VERSION),
    ("vllm", FREE_POLICY_VERSIONS["vllm"], True, DEFAULT_VLLM_VERSION),
    ("classic", FREE_POLICY_VERSIONS["classic"], True, "0.23"),
)


@dataclass(frozen=True)
class PolicyResult:
    """What one cache setting did with a workload (token counts over all its requests)."""

    key: str  # "off" | "vllm" | "classic"
    label: str
    prompt_tokens: int
    hit_tokens: int  # prompt tokens served from the cache
    prefill_computed: int  # prompt tokens run through the model (recomputation included)
    evictions: int
    requests: int

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True)
class TraceSpec:
    """A generated trace: requests that start with one of a few shared prefixes.

    Popular prefixes come back often (a Zipf-like choice), each request adds its own
    suffix, and a small pool forces evictions, so the free rule decides what survives.
    """

    num_requests: int = 40
    num_prefixes: int = 4
    prefix_blocks: int = 3
    suffix_tokens: int = 5  # with the output, leaves a partial tail block: where the free rules differ
    output_tokens: int = 3
    concurrency: int = 2  # requests added together before running them to completion
    block_size: int = 4
    num_blocks: int = 16
    seed: int = 0


def generate_trace(spec: TraceSpec) -> list[list[int]]:
    """Token-id prompts for ``spec`` (deterministic for a seed)."""
    rng = random.Random(spec.seed)
    prefix_len = spec.prefix_blocks * spec.block_size
    prefixes = [[100 * (p + 1) + i for i in range(prefix_len)] for p in range(spec.num_prefixes)]
    weights = [1 / (rank + 1) for rank in range(spec.num_prefixes)]
    prompts = []
    for n in range(spec.num_requests):
        prefix = rng.choices(prefixes, weights)[0]
        suffix = [20_000 + n * 64 + i for i in range(spec.suffix_tokens)]  # unique per request
        prompts.append(prefix + suffix)
    return prompts


def _result(key: str, label: str, engine: LLMEngine) -> PolicyResult:
    stats = engine.kv_cache_manager.prefix_cache_stats
    events = engine.kv_cache_manager.events.events
    return PolicyResult(
        key=key, label=label,
        prompt_tokens=sum(m.num_prompt_tokens for m in engine.metrics.values()),
        hit_tokens=stats.hits,  # as vLLM counts: re-hits after a preemption are not reuse
        prefill_computed=sum(m.num_computed_prefill_tokens for m in engine.metrics.values()),
        evictions=sum(len(e.block_ids) for e in events if isinstance(e, BlockRemoved)),
        requests=len(engine.metrics),
    )


def _engine(caching: bool, vllm_version: str, num_blocks: int, block_size: int, **extra: Any) -> LLMEngine:
    return LLMEngine(EngineConfig(backend="simulator", num_blocks=num_blocks, block_size=block_size,
                                  enable_prefix_caching=caching, vllm_version=vllm_version, **extra))


def compare_trace(spec: TraceSpec) -> list[PolicyResult]:
    """Play the generated trace under every setting."""
    prompts = generate_trace(spec)
    results = []
    for key, label, caching, version in SETTINGS:
        engine = _engine(caching, version, spec.num_blocks, spec.block_size)
        params = SamplingParams(max_tokens=spec.output_tokens)
        for start in range(0, len(prompts), spec.concurrency):
            for prompt in prompts[start:start + spec.concurrency]:
                engine.add_request(prompt, params)
            while engine.has_unfinished_requests():
                engine.step()
        results.append(_result(key, label, engine))
    return results


def compare_scenario(text: str, num_blocks: int | None = None, block_size: int | None = None) -> list[PolicyResult]:
    """Play a scenario (lab syntax) under every setting; sizes default to the scenario's own.

    Raises :class:`~teaching.scenarios.scenario.ScenarioError` for a scenario that does not parse or play.
    """
    runs = [(key, label, run_scenario(text, version, enable_prefix_caching=caching, num_blocks=num_blocks,
                                      block_size=block_size)) for key, label, caching, version in SETTINGS]
    return [_result(key, label, run.engine) for key, label, run in runs]
