"""TTFT for a prefix found in the device pool, in the offload tier, and recomputed: one run, one engine.

Workload: prompts of one long shared-style prefix (``--prefix-tokens``, default 1024) plus a short
distinct question, on the default model (SmolLM2-135M-Instruct) with the KV offloading tier on
(``kv_offloading_size``). Each round uses a fresh prefix (random token ids, so no round can hit
another's blocks) and measures three requests of the same length:

1. **recompute**: the prefix is nowhere; every token is prefilled.
2. **device hit**: the same prefix again, right away: its blocks are still in the device pool.
3. **tier hit**: the device pool's prefix cache is cleared (as if evicted; the tier keeps its
   copies), then the prefix again: its blocks are loaded from host memory into fresh device blocks.

The three alternate within each of ``--repeats`` rounds and medians are reported, so a noisy
neighbour hurts each alike. The greedy first tokens of the three must be equal, and the run says
so. Run: ``python -m bench.offload [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model import ModelBackend  # first: it sets OpenMP's wait policy before torch loads  # noqa: F401


def ttft(engine: LLMEngine, prompt: list[int]) -> tuple[float, int, int, int]:
    """TTFT, cached tokens, tokens loaded from the tier for this request, and the first token."""
    before = engine.offloading.stats.external_hits if engine.offloading else 0
    out = engine.generate([prompt], SamplingParams(max_tokens=1))[0]
    assert out.metrics is not None and out.metrics.ttft is not None
    after = engine.offloading.stats.external_hits if engine.offloading else 0
    return out.metrics.ttft, out.num_cached_tokens, after - before, out.token_ids[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix-tokens", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tier-gib", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="256-token prefix, 2 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.prefix_tokens, args.repeats = 256, 2
    engine = LLMEngine(EngineConfig(kv_offloading_size=args.tier_gib))
    vocab = engine.backend.vocab_size or 32000
    rng = random.Random(0)
    question = engine.tokenize(" Which rule matters most, and why?")
    engine.generate([[rng.randrange(vocab) for _ in range(64)]], SamplingParams(max_tokens=1))  # warm-up
    rows: dict[str, list[float]] = {"recompute": [], "device hit": [], "tier hit": []}
    cached: dict[str, list[int]] = {k: [] for k in rows}
    loaded: dict[str, list[int]] = {k: [] for k in rows}
    same_tokens = True
    for _ in range(args.repeats):
        prompt = [rng.randrange(vocab) for _ in range(args.prefix_tokens)] + question
        firsts = []
        for name in rows:
            if name == "tier hit":
                assert engine.kv_cache_manager.reset_prefix_cache(), "nothing runs between requests"
            seconds, hit, from_tier, first = ttft(engine, prompt)
            rows[name].append(seconds)
            cached[name].append(hit)
            loaded[name].append(from_tier)
            firsts.append(first)
        same_tokens &= len(set(firsts)) == 1
    device = getattr(engine.backend, "device", "cpu")
    print(f"model {engine.config.model} on {device}, prompt {args.prefix_tokens + len(question)} tokens "
          f"(block {engine.config.block_size}), tier {engine.offloading.manager.num_chunks} blocks "  # type: ignore[union-attr]
          f"({args.tier_gib} GiB), median of {args.repeats} rounds")
    base = statistics.median(rows["recompute"])
    print(f"| {'prefix found':<12} | {'TTFT ms':>8} | {'vs recompute':>12} | {'cached tokens':>13} | {'from tier':>9} |")
    print(f"|{'-' * 14}|{'-' * 10}|{'-' * 14}|{'-' * 15}|{'-' * 11}|")
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"| {name:<12} | {median * 1e3:8.1f} | {base / median:11.2f}x | {statistics.median(cached[name]):13.0f} "
              f"| {statistics.median(loaded[name]):9.0f} |")
    print(f"greedy first tokens equal across the three: {same_tokens}")
    return 0 if same_tokens else 1


if __name__ == "__main__":
    sys.exit(main())
