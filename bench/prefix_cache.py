"""Prefix caching on the real model: TTFT and throughput, cache on vs off vs transformers, one run.

Workload: N chat requests (default 8) that share one long system prompt (> 512 tokens) and ask
short, distinct questions, on the default model (SmolLM2-135M-Instruct) on the CPU.

1. **TTFT**: requests arrive one at a time (each runs to its first token before the next
   arrives), on a fresh engine with caching on, then off. With caching on, the first request
   computes the system prompt and every later one finds it cached. "Ideal" speed-up is prompt
   tokens / computed prefill tokens: what skipping work would buy if a forward pass cost exactly
   in proportion to its tokens. It does not: each pass also reads all the weights once.
2. **Throughput**: all requests submitted at once, generated to the end (greedy), timed end to
   end. PrefixLab (cache on, cache off) vs the baseline: transformers' ``generate`` on the same
   weights, one request at a time, each with HF's own KV cache (no prefix sharing, no batching).
   The greedy tokens of all three must be identical, and the run says so.

Configurations alternate across ``--repeats`` rounds and medians are reported, so a noisy
neighbour on the machine hurts each side alike. Run: ``python -m bench.prefix_cache [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model import ModelBackend
from engine.model.weights import ModelWeights

SYSTEM_PROMPT = " ".join(
    f"Rule {i}: when you explain how an inference engine serves requests, name the block table, "
    f"the block hashes and the free queue, and keep every answer under three sentences."
    for i in range(1, 25)
)
QUESTIONS = [
    "What is a block table?",
    "Why are only full blocks hashed?",
    "What does the free queue hold?",
    "When is a cached block evicted?",
    "What is time to first token?",
    "Why does chunked prefill help?",
    "What does preemption do to a request?",
    "How big is one KV block?",
    "What is a cache salt for?",
    "Why is the last prompt token never a cache hit?",
    "What is a reference count?",
    "How does a chained hash work?",
]


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def fresh_engine(weights: ModelWeights, caching: bool) -> LLMEngine:
    """A new engine with its own KV pages on the shared weights."""
    config = EngineConfig(enable_prefix_caching=caching)
    return LLMEngine(config, backend=ModelBackend(config, weights=weights))


def ttft_run(weights: ModelWeights, caching: bool, prompts: list[list[int]]) -> dict[str, float]:
    """Requests one at a time on a fresh engine: TTFT and prefill tokens, all and warm-only."""
    engine = fresh_engine(weights, caching)
    ttfts, prompt_tokens, computed = [], [], []
    for prompt in prompts:
        metrics = engine.generate([prompt], SamplingParams(max_tokens=1))[0].metrics
        assert metrics is not None and metrics.ttft is not None, "a finished request has its metrics"
        ttfts.append(metrics.ttft)
        prompt_tokens.append(metrics.num_prompt_tokens)
        computed.append(metrics.num_computed_prefill_tokens)
    return {
        "ttft_all": statistics.mean(ttfts), "ttft_warm": statistics.mean(ttfts[1:]),
        "prompt_all": sum(prompt_tokens), "computed_all": sum(computed),
        "prompt_warm": sum(prompt_tokens[1:]), "computed_warm": sum(computed[1:]),
    }


def engine_throughput(weights: ModelWeights, caching: bool, prompts: list[list[int]], max_tokens: int) -> tuple[float, list[list[int]]]:
    """All requests at once, to completion: seconds and the generated tokens."""
    engine = fresh_engine(weights, caching)
    start = time.perf_counter()
    outputs = engine.generate(prompts, SamplingParams(max_tokens=max_tokens))
    return time.perf_counter() - start, [o.token_ids for o in outputs]


def transformers_throughput(hf_model, prompts: list[list[int]], max_tokens: int, eos: set[int]) -> tuple[float, list[list[int]]]:
    """The baseline: HF ``generate``, greedy, one request after the other, HF's own KV cache."""
    outputs = []
    start = time.perf_counter()
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            out = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=max_tokens, eos_token_id=sorted(eos), pad_token_id=sorted(eos)[0])
            outputs.append(out[0, len(prompt):].tolist())
    return time.perf_counter() - start, outputs


def note(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 requests, 8 output tokens, 1 round")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.requests, args.max_tokens, args.repeats = 4, 8, 1
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    backend = ModelBackend(EngineConfig())
    hf_model = backend.hf_model  # same weights, its own forward: no extra memory
    prompts = [backend.apply_chat_template(chat(QUESTIONS[i % len(QUESTIONS)] + (f" ({i})" if i >= len(QUESTIONS) else "")))
               for i in range(args.requests)]
    shared = len(backend.apply_chat_template(chat("")))
    n = len(prompts)

    # Warm-up: the first forward pass pages the weights in and sets up kernels; time none of that.
    fresh_engine(backend.local_weights, True).generate([prompts[0]], SamplingParams(max_tokens=2))

    ttft: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    seconds: dict[str, list[float]] = {"on": [], "off": [], "hf": []}
    tokens: dict[str, list[list[int]]] = {}
    engine_peak_rss = 0
    for round_ in range(args.repeats):
        for caching in (True, False):
            note(f"round {round_ + 1}: TTFT, cache {'on' if caching else 'off'}")
            ttft[caching].append(ttft_run(backend.local_weights, caching, prompts))
        for name, run in (("on", lambda: engine_throughput(backend.local_weights, True, prompts, args.max_tokens)),
                          ("off", lambda: engine_throughput(backend.local_weights, False, prompts, args.max_tokens)),
                          ("hf", lambda: transformers_throughput(hf_model, prompts, args.max_tokens, backend.eos_token_ids))):
            note(f"round {round_ + 1}: throughput, {name}")
            if name == "hf" and not engine_peak_rss:  # before the baseline adds its own peaks
                engine_peak_rss = peak_rss_bytes()
            elapsed, tokens[name] = run()
            seconds[name].append(elapsed)

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    on, off = ttft[True], ttft[False]
    speedup_all = med(off, "ttft_all") / med(on, "ttft_all")
    ideal_all = on[0]["prompt_all"] / on[0]["computed_all"]
    speedup_warm = med(off, "ttft_warm") / med(on, "ttft_warm")
    ideal_warm = on[0]["prompt_warm"] / on[0]["computed_warm"]
    rps = {name: n / statistics.median(s) for name, s in seconds.items()}
    out_tokens = sum(len(t) for t in tokens["hf"])
    identical = tokens["on"] == tokens["off"] == tokens["hf"]

    print(f"\nPrefixLab prefix-cache benchmark: {n} requests sharing a {shared}-token system prompt "
          f"(prompts {min(map(len, prompts))}-{max(map(len, prompts))} tokens), {args.max_tokens} output tokens max, "
          f"SmolLM2-135M-Instruct {backend.dtype} on {backend.device}, {torch.get_num_threads()} threads, "
          f"median of {args.repeats} round(s), load average {os.getloadavg()[0]:.2f}.\n")
    print("| metric | cache on | cache off | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| mean TTFT, all {n} requests one at a time (s) | {med(on, 'ttft_all'):.3f} | {med(off, 'ttft_all'):.3f} | "
          f"{speedup_all:.2f}x (ideal {ideal_all:.2f}x: {speedup_all / ideal_all:.0%} of ideal) |")
    print(f"| mean TTFT, requests 2-{n}, prefix already cached (s) | {med(on, 'ttft_warm'):.3f} | {med(off, 'ttft_warm'):.3f} | "
          f"{speedup_warm:.2f}x (ideal {ideal_warm:.2f}x: {speedup_warm / ideal_warm:.0%} of ideal) |")
    print(f"| prefill tokens computed / prompt tokens | {on[0]['computed_all']} / {on[0]['prompt_all']} | "
          f"{off[0]['computed_all']} / {off[0]['prompt_all']} | |")
    print()
    print("| throughput, all requests at once | requests/s | vs transformers |")
    print("|---|---:|---:|")
    print(f"| PrefixLab, cache on | {rps['on']:.3f} | {rps['on'] / rps['hf']:.2f}x |")
    print(f"| PrefixLab, cache off | {rps['off']:.3f} | {rps['off'] / rps['hf']:.2f}x |")
    print(f"| transformers `generate`, one request at a time (HF KV cache) | {rps['hf']:.3f} | 1.00x |")
    print()
    print(f"Output tokens per run: {out_tokens}; greedy outputs identical across the three: {'yes' if identical else 'NO'}.")
    print(f"KV cache: {backend.kv_bytes_per_token:,} bytes per token, {backend.kv_cache_bytes / 2**20:.0f} MiB allocated "
          f"({backend.kv_cache_bytes // (backend.kv_bytes_per_token * 16)} blocks of 16). "
          f"Peak RSS: {engine_peak_rss / 2**30:.2f} GiB for PrefixLab's runs, "
          f"{peak_rss_bytes() / 2**30:.2f} GiB after the transformers baseline too.")


if __name__ == "__main__":
    main()
