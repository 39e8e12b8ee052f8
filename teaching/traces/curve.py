"""The miss-ratio curve: hit rate against cache capacity, per policy, with the ceiling.

Capacities are spaced evenly on a log scale of *tokens* (10^4 .. 10^8 by default) and
rounded to whole 512-token blocks. The ceiling is the unbounded cache: no policy can beat
it, since with room for everything nothing is ever evicted.
"""

from __future__ import annotations

from dataclasses import dataclass

from teaching.traces.loader import TRACE_BLOCK_SIZE
from teaching.traces.policies import POLICIES
from teaching.traces.replay import PreparedTrace, Progress, ReplayResult, replay

#: The curve's default span, in tokens (10^4 .. 10^8), and how many capacities it samples.
DEFAULT_MIN_TOKENS = 10**4
DEFAULT_MAX_TOKENS = 10**8
DEFAULT_POINTS = 8


def capacity_blocks(min_tokens: int = DEFAULT_MIN_TOKENS, max_tokens: int = DEFAULT_MAX_TOKENS,
                    points: int = DEFAULT_POINTS) -> list[int]:
    """``points`` capacities in blocks, log-spaced in tokens (at least one block each)."""
    if points < 2 or min_tokens <= 0 or max_tokens <= min_tokens:
        raise ValueError("need at least 2 points and 0 < min_tokens < max_tokens")
    ratio = (max_tokens / min_tokens) ** (1 / (points - 1))
    return [max(1, round(min_tokens * ratio**i / TRACE_BLOCK_SIZE)) for i in range(points)]


@dataclass
class Curve:
    """Replays over a grid of policies x capacities, and the unbounded run."""

    capacities: list[int]  # usable blocks
    results: dict[str, list[ReplayResult]]  # policy -> one result per capacity
    ceiling: ReplayResult

    def hit_rates(self, policy: str, tokens: bool = True) -> list[float]:
        return [r.total.token_hit_rate if tokens else r.total.block_hit_rate for r in self.results[policy]]


def miss_ratio_curve(prepared: PreparedTrace, policies: list[str] | None = None, capacities: list[int] | None = None,
                     *, mode: str = "sequential", progress: Progress | None = None) -> Curve:
    """Replay ``prepared`` at every capacity under every policy (one full replay each)."""
    policies = list(policies or POLICIES)
    capacities = list(capacities or capacity_blocks())
    total = len(policies) * len(capacities) + 1
    done = 0

    def step(message: str) -> None:
        if progress:
            progress(done / total, message)

    step("unbounded cache (the ceiling)")
    ceiling = replay(prepared, "vllm", 0, mode=mode)
    done += 1
    results: dict[str, list[ReplayResult]] = {}
    for policy in policies:
        results[policy] = []
        for blocks in capacities:
            step(f"{POLICIES[policy]} at {blocks * TRACE_BLOCK_SIZE:,} tokens")
            results[policy].append(replay(prepared, policy, blocks, mode=mode))
            done += 1
    step("done")
    return Curve(capacities, results, ceiling)
