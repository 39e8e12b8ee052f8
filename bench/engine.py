"""Engine speed against this machine's limits and against real vLLM, measured side by side in one run.

* **Limits, measured here and now**: memory bandwidth (a STREAM-like triad ``a = b + s * c`` on
  tensors far larger than the caches) and matmul throughput (a large ``torch.mm`` in the model's
  dtype and thread count). A neighbour slowing the machine slows these and the engine alike.
* **Decode** at batch 1, 4, 16, 64: tokens/s as a fraction of the bandwidth limit. One decode step
  must read every weight once and the K/V each request attends to, so the limit is
  ``batch x bandwidth / (weight bytes + KV bytes attended)`` tokens/s.
* **Prefill** of 128, 512, 2048 tokens: tokens/s as a fraction of the matmul limit, which is the
  measured GFLOP/s over the model's FLOPs per token (projections, MLP and causal attention).
* **Cached-prefix TTFT**: a request whose long prefix is cached against a cold request made of only
  its uncached tokens. The honest ideal is 1.0x: the prefix should cost only the attention reading it.
* **Real vLLM** (the CPU build, in its own virtualenv, in a subprocess) and transformers'
  ``generate`` on the same prompts: greedy outputs token by token, throughput and cached TTFT.

Run: ``python -m bench.engine [--quick] [--no-vllm]`` (or ``prefixlab bench engine``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.model import ModelBackend

# isort: split
import torch

from bench.prefix_cache import QUESTIONS, chat, note, peak_rss_bytes, transformers_throughput
from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model.threads import fixed_num_threads, threads_for_load
from engine.outputs import RequestMetrics
from engine.runtime.huge_pages import HUGE_PAGES_TUNABLE, huge_pages_env, restart_on_huge_pages

#: vLLM's CPU attention wants blocks of a multiple of 32 tokens.
VLLM_BLOCK_SIZE = 32
VLLM_CPU_VENV = "cpu-0.32.0"
DECODE_BATCHES = (1, 4, 16, 64)
PREFILL_LENGTHS = (128, 512, 2048)
DECODE_PROMPT_TOKENS = 128
TTFT_PAIRS_PER_PROBE = 4
KV_MIB = 1024  # room for 64 requests of ~160 tokens, and a 2048-token prefill



def engine_on(backend: ModelBackend, config: EngineConfig) -> LLMEngine:
    """A fresh engine on ``backend``'s weights: each engine owns its KV pages, only weights are shared."""
    return LLMEngine(config, backend=ModelBackend(config, weights=backend.weights))

def best_of(repeats: int, fn: Callable[[], float]) -> float:
    """Shortest of several timings: the run a busy neighbour disturbed least."""
    return min(fn() for _ in range(repeats))


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_bandwidth(dtype: torch.dtype, mib: int = 256, repeats: int = 5) -> float:
    """Bytes/s of a STREAM triad ``a = b + 2 c`` (reads b and c, writes a) on ``mib``-MiB tensors."""
    n = mib * 2**20 // torch.empty((), dtype=dtype).element_size()
    a, b, c = torch.empty(n, dtype=dtype), torch.rand(n, dtype=dtype), torch.rand(n, dtype=dtype)
    torch.add(b, c, alpha=2, out=a)  # touch the pages once
    seconds = best_of(repeats, lambda: timed(lambda: torch.add(b, c, alpha=2, out=a)))
    return 3 * n * a.element_size() / seconds


def measure_matmul(dtype: torch.dtype, size: int = 2048, repeats: int = 3) -> float:
    """FLOP/s of a ``size`` x ``size`` matmul."""
    x, y = torch.rand(size, size, dtype=dtype), torch.rand(size, size, dtype=dtype)
    torch.mm(x, y)
    seconds = best_of(repeats, lambda: timed(lambda: torch.mm(x, y)))
    return 2 * size**3 / seconds


def unique_param_bytes(model: Any) -> int:
    """Bytes of the weights, each stored tensor once (a tied embedding is the LM head too)."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return total


def linear_flops_per_token(model: Any) -> int:
    """2 x the weights every token multiplies: all decoder-layer matrices (not the embedding,
    not the LM head, which a prefill runs for its last token only)."""
    layers = model.model.layers if hasattr(model, "model") else model.transformer.h
    return 2 * sum(p.numel() for p in layers.parameters() if p.dim() == 2)


def attention_flops(backend: ModelBackend, query_len: int, context_before: int) -> int:
    """QK^T and PV of a causal chunk: each query at position p reads p + 1 keys."""
    m = backend.model
    keys = sum(context_before + i + 1 for i in range(query_len))
    return 2 * 2 * m.num_layers * m.num_heads * m.head_dim * keys


def synthetic_prompt(length: int, seed: int) -> list[int]:
    return [(seed * 7919 + i * 104729) % 40000 + 100 for i in range(length)]


def decode_rate(backend: ModelBackend, batch: int, steps: int) -> tuple[float, float]:
    """Decode tokens/s at ``batch`` and the mean bytes one step reads (weights + KV attended)."""
    engine = engine_on(backend, EngineConfig(enable_prefix_caching=False, kv_cache_memory_mib=KV_MIB,
                                    max_num_batched_tokens=batch * DECODE_PROMPT_TOKENS))
    ids = [engine.add_request(synthetic_prompt(DECODE_PROMPT_TOKENS, b), SamplingParams(max_tokens=steps + 2, ignore_eos=True))
           for b in range(batch)]
    while any(engine.metrics[i].first_token_time is None for i in ids):
        engine.step()
    weight_bytes = unique_param_bytes(backend.hf_model)
    kv_read = 0
    start = time.perf_counter()
    for _ in range(steps):
        kv_read += sum(engine.get_request(i).num_tokens for i in ids) * backend.kv_bytes_per_token
        engine.step()
    elapsed = time.perf_counter() - start
    return batch * steps / elapsed, weight_bytes + kv_read / steps


def prefill_seconds(backend: ModelBackend, length: int) -> float:
    """Engine-measured compute time of one fresh prefill of ``length`` tokens (one step)."""
    engine = engine_on(backend, EngineConfig(enable_prefix_caching=False, kv_cache_memory_mib=KV_MIB,
                                    max_num_batched_tokens=max(length, 2048)))
    out = engine.generate([synthetic_prompt(length, length)], SamplingParams(max_tokens=1))[0]
    return metrics_of(out.metrics).prefill_time


def cached_vs_cold_ttft(backend: ModelBackend, warm: list[int], probe: list[int]) -> tuple[float, float, int, int]:
    """TTFT of ``probe`` with its prefix cached (``warm`` shares it), and of its uncached tokens alone."""
    engine = engine_on(backend, EngineConfig())
    engine.generate([warm], SamplingParams(max_tokens=1))
    cached_metrics = metrics_of(engine.generate([probe], SamplingParams(max_tokens=1))[0].metrics)
    cached = cached_metrics.num_cached_tokens
    cold_engine = engine_on(backend, EngineConfig())
    cold_metrics = metrics_of(cold_engine.generate([probe[cached:]], SamplingParams(max_tokens=1))[0].metrics)
    return cached_metrics.ttft or 0.0, cold_metrics.ttft or 0.0, cached, len(probe) - cached


def metrics_of(metrics: RequestMetrics | None) -> RequestMetrics:
    if metrics is None:
        raise RuntimeError("the engine returned no metrics")
    return metrics


def prefixlab_serving(backend: ModelBackend, prompts: list[list[int]], max_tokens: int,
                      probes: list[list[int]]) -> dict[str, Any]:
    """The protocol of ``bench/vllm_cpu.py``, on PrefixLab: all prompts at once, then cached probes
    (wall clock of ``generate`` around each, as for vLLM)."""
    engine = engine_on(backend, EngineConfig())
    start = time.perf_counter()
    outputs = engine.generate(prompts, SamplingParams(max_tokens=max_tokens))
    throughput_s = time.perf_counter() - start
    engine = engine_on(backend, EngineConfig())
    engine.generate([prompts[0]], SamplingParams(max_tokens=1))
    ttfts, cached = [], []
    for probe in probes:
        begin = time.perf_counter()
        out = engine.generate([probe], SamplingParams(max_tokens=1))[0]
        ttfts.append(time.perf_counter() - begin)
        cached.append(out.num_cached_tokens)
    return {"throughput_s": throughput_s, "outputs": [o.token_ids for o in outputs], "cached_ttft_s": ttfts,
            "cached_tokens": cached}


def vllm_python() -> Path | None:
    root = Path(os.environ.get("PREFIXLAB_VLLM_ENV_DIR", Path.home() / ".cache" / "prefixlab-vllm"))
    python = root / VLLM_CPU_VENV / "bin" / "python"
    return python if python.is_file() else None


def run_vllm(python: Path, job: dict[str, Any], timeout_s: int, huge_pages: bool = False) -> dict[str, Any] | str:
    """The vLLM half in its own venv; its JSON result, or a sentence saying why there is none.

    vLLM runs as it ships: without PrefixLab's huge-page tunable, unless ``huge_pages``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    others = ":".join(t for t in env.pop("GLIBC_TUNABLES", "").split(":") if t and t != HUGE_PAGES_TUNABLE)
    if others:
        env["GLIBC_TUNABLES"] = others
    if huge_pages:
        env = huge_pages_env(env)
    try:
        proc = subprocess.run([str(python), str(Path(__file__).with_name("vllm_cpu.py"))], input=json.dumps(job),
                              capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return f"vLLM did not finish within {timeout_s} s"
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT "):])
            return result
    return f"vLLM failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:] or ['no output']}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats; decode batches 1 and 16 only")
    parser.add_argument("--no-vllm", action="store_true", help="skip the real-vLLM comparison")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for the whole run (default: the engine's choice for the load now)")
    parser.add_argument("--vllm-timeout", type=int, default=1800, help="seconds for vLLM's start-up and runs")
    parser.add_argument("--vllm-huge-pages", action="store_true",
                        help="run vLLM with PrefixLab's huge-page malloc tunable too (by default it runs as it ships)")
    args = parser.parse_args(argv)
    batches: tuple[int, ...] = DECODE_BATCHES
    steps = 16
    if args.quick:
        batches, steps, args.repeats, args.max_tokens = (1, 16), 8, 1, 16
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    load_start = os.getloadavg()[0]
    # One thread count for the whole run: the limits and the engine must use the same.
    threads = args.threads or fixed_num_threads() or threads_for_load(load_start, os.cpu_count() or 1)
    os.environ["PREFIXLAB_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    backend = ModelBackend(EngineConfig(kv_cache_memory_mib=KV_MIB))
    dtype = backend.dtype
    prompts = [backend.apply_chat_template(chat(QUESTIONS[i % len(QUESTIONS)])) for i in range(args.requests)]
    probes = prompts[1:4]

    vllm_result: dict[str, Any] | str = "skipped (--no-vllm)"
    python = vllm_python()
    vllm_job = {"model": str(backend_folder(backend)), "block_size": VLLM_BLOCK_SIZE, "max_model_len": 2048,
                "prompts": prompts, "max_tokens": args.max_tokens, "repeats": args.repeats, "warm": prompts[0],
                "probes": probes}
    if not args.no_vllm and python is None:
        vllm_result = f"no vLLM CPU venv ({VLLM_CPU_VENV}); build it with the vllm-env tool"

    # Warm-up: page the weights in, set up kernels.
    engine_on(backend, EngineConfig()).generate([prompts[0]], SamplingParams(max_tokens=2))

    note("limits: bandwidth and matmul")
    bandwidth = [measure_bandwidth(dtype) for _ in range(args.repeats)]
    matmul = [measure_matmul(dtype) for _ in range(args.repeats)]

    decode: dict[int, list[tuple[float, float]]] = {b: [] for b in batches}
    prefill: dict[int, list[float]] = {n: [] for n in PREFILL_LENGTHS}
    ttft_pairs: list[tuple[float, float, int, int]] = []
    serving: list[dict[str, Any]] = []
    hf_runs: list[tuple[float, list[list[int]]]] = []
    for round_ in range(args.repeats):
        for b in batches:
            note(f"round {round_ + 1}: decode at batch {b}")
            decode[b].append(decode_rate(backend, b, steps))
        for n in PREFILL_LENGTHS:
            note(f"round {round_ + 1}: prefill of {n} tokens")
            prefill[n].append(prefill_seconds(backend, n))
        note(f"round {round_ + 1}: cached-prefix TTFT vs its uncached tokens alone")
        for _ in range(TTFT_PAIRS_PER_PROBE):  # cheap and noisy: many alternating pairs
            for probe in probes:
                ttft_pairs.append(cached_vs_cold_ttft(backend, prompts[0], probe))
        note(f"round {round_ + 1}: PrefixLab serving protocol (as vLLM's)")
        serving.append(prefixlab_serving(backend, prompts, args.max_tokens, probes))
        # Measure the limits again between rounds: the machine's load changes under us.
        bandwidth.append(measure_bandwidth(dtype))
        matmul.append(measure_matmul(dtype))
    engine_rss = peak_rss_bytes()
    note("transformers generate (baseline)")
    hf_runs.append(transformers_throughput(backend.hf_model, prompts, args.max_tokens, backend.eos_token_ids))

    if not args.no_vllm and python is not None:
        note("real vLLM (CPU build) in its own venv: start-up takes a while")
        vllm_result = run_vllm(python, vllm_job, args.vllm_timeout, args.vllm_huge_pages)
        # And PrefixLab once more right after, so both sides saw a similar machine.
        serving.append(prefixlab_serving(backend, prompts, args.max_tokens, probes))

    report(args, backend, batches, bandwidth, matmul, decode, prefill, ttft_pairs, serving, hf_runs, vllm_result,
           engine_rss, load_start)


def backend_folder(backend: ModelBackend) -> Path:
    from engine.model.loader import resolve_model_folder

    return Path(resolve_model_folder(backend.config.model))


def report(args: argparse.Namespace, backend: ModelBackend, batches: tuple[int, ...], bandwidth: list[float],
           matmul: list[float], decode: dict[int, list[tuple[float, float]]], prefill: dict[int, list[float]],
           ttft_pairs: list[tuple[float, float, int, int]], serving: list[dict[str, Any]],
           hf_runs: list[tuple[float, list[list[int]]]], vllm_result: dict[str, Any] | str, engine_rss: int,
           load_start: float) -> None:
    bw = statistics.median(bandwidth)
    mm = statistics.median(matmul)
    hf_model = backend.hf_model
    print(f"\nPrefixLab engine speed: SmolLM2-135M-Instruct {backend.dtype} on {backend.device}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs, median of {args.repeats} round(s). "
          f"Load average at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f}.")
    on_huge = HUGE_PAGES_TUNABLE in os.environ.get("GLIBC_TUNABLES", "")
    print(f"Memory: PrefixLab's malloc {'on transparent huge pages' if on_huge else 'on 4 KiB pages'} "
          f"(GLIBC_TUNABLES={HUGE_PAGES_TUNABLE if on_huge else 'unset'}), vLLM's "
          f"{'too' if args.vllm_huge_pages else 'as it ships'}.")
    print(f"Measured limits: bandwidth {bw / 1e9:.1f} GB/s (triad, median of {len(bandwidth)}; range "
          f"{min(bandwidth) / 1e9:.1f}-{max(bandwidth) / 1e9:.1f}), matmul {mm / 1e9:.1f} GFLOP/s "
          f"(2048^2 torch.mm, range {min(matmul) / 1e9:.1f}-{max(matmul) / 1e9:.1f}). "
          f"Weights: {unique_param_bytes(hf_model) / 1e6:.0f} MB.\n")

    print("| decode batch | tokens/s | bytes read per step (MB) | bandwidth limit (tokens/s) | fraction of limit |")
    print("|---:|---:|---:|---:|---:|")
    for b in batches:
        rate = statistics.median(r for r, _ in decode[b])
        step_bytes = statistics.median(s for _, s in decode[b])
        limit = b * bw / step_bytes
        print(f"| {b} | {rate:.1f} | {step_bytes / 1e6:.0f} | {limit:.0f} | {rate / limit:.0%} |")
    print()
    print("| prefill tokens | tokens/s | GFLOP per token | matmul limit (tokens/s) | fraction of limit |")
    print("|---:|---:|---:|---:|---:|")
    for n in PREFILL_LENGTHS:
        seconds = statistics.median(prefill[n])
        flops_per_token = linear_flops_per_token(hf_model) + attention_flops(backend, n, 0) / n
        limit = mm / flops_per_token
        print(f"| {n} | {n / seconds:.0f} | {flops_per_token / 1e9:.3f} | {limit:.0f} | {n / seconds / limit:.0%} |")
    print()
    cached = statistics.median(p[0] for p in ttft_pairs)
    cold = statistics.median(p[1] for p in ttft_pairs)
    hits, uncached = ttft_pairs[0][2], ttft_pairs[0][3]
    print(f"Cached-prefix TTFT: {cached * 1000:.0f} ms with {hits} prompt tokens cached, vs {cold * 1000:.0f} ms for "
          f"a cold request of only its {uncached} uncached tokens: "
          f"{cached / cold:.3f}x (ideal 1.00x, goal <= 1.25x; median of {len(ttft_pairs)} pairs).\n")

    hf_seconds, hf_tokens = hf_runs[0]
    ours = statistics.median(s["throughput_s"] for s in serving)
    ours_ttft = statistics.median(t for s in serving for t in s["cached_ttft_s"])
    n = len(serving[0]["outputs"])
    print(f"| {n} chat requests at once, greedy, {args.max_tokens} tokens max | seconds | requests/s | "
          f"cached-prefix TTFT (ms) | PrefixLab vs it: throughput | PrefixLab vs it: cached TTFT | greedy tokens equal |")
    print("|---|---:|---:|---:|---:|---:|---|")
    print(f"| PrefixLab | {ours:.2f} | {n / ours:.2f} | {ours_ttft * 1000:.0f} | 1.00x | 1.00x | |")
    if isinstance(vllm_result, dict):
        v_s = statistics.median(vllm_result["throughput_s"])
        v_ttft = statistics.median(vllm_result["cached_ttft_s"])
        same = sum(a == b for a, b in zip(serving[0]["outputs"], vllm_result["outputs"]))
        print(f"| vLLM {VLLM_CPU_VENV.split('-')[1]} CPU build | {v_s:.2f} | {n / v_s:.2f} | {v_ttft * 1000:.0f} | "
              f"{v_s / ours:.2f}x | {v_ttft / ours_ttft:.2f}x | {same} of {n} |")
    else:
        print(f"| vLLM CPU build | - | - | - | - | - | {vllm_result} |")
    same_hf = sum(a == b for a, b in zip(serving[0]["outputs"], hf_tokens))
    print(f"| transformers `generate`, one request at a time | {hf_seconds:.2f} | {n / hf_seconds:.2f} | - | "
          f"{hf_seconds / ours:.2f}x | - | {same_hf} of {n} |")
    if isinstance(vllm_result, dict):
        print(f"\nvLLM: start-up {vllm_result['startup_s']:.0f} s (not timed above); block size {VLLM_BLOCK_SIZE} "
              f"(its CPU attention's), so it caches {statistics.median(vllm_result['cached_tokens']):.0f} prompt tokens "
              f"per probe vs PrefixLab's {statistics.median(serving[0]['cached_tokens']):.0f} (block size 16).")
    print(f"Peak RSS of this process after PrefixLab's runs: {engine_rss / 2**30:.2f} GiB "
          f"(KV pool {backend.kv_cache_bytes / 2**20:.0f} MiB here; the app's default is 256 MiB).")


if __name__ == "__main__":
    restart_on_huge_pages()  # the weights on huge pages, as in the app's model worker
    main(sys.argv[1:])
