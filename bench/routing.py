"""Routing benchmark: K ``prefixlab serve`` replicas behind vLLM's router, one policy after another.

    python -m bench.routing [--replicas 4] [--policies round_robin consistent_hash kv_aware] [--client auto]

The replicas start once; for each policy their prefix caches are reset, a fresh ``vllm-router``
starts in front of them, and vLLM's ``prefix_repetition`` workload (several long shared prefixes,
short unique suffixes) goes through it. Measured per policy, in one run: the prefix-cache hit rate
from each replica's ``/metrics`` (hit tokens / queried tokens, as vLLM counts them), TTFT p50 / p99,
and load balance (requests on the busiest replica / the mean). Beside each, what
``prefixlab trace replay --replicas K --router ...`` predicts for the same workload.

The client is vLLM's own benchmark client (``vllm-bench-serve``, which needs the vLLM CPU venv)
when it is there; otherwise the same workload shape is driven with the ``openai`` client (text
prefixes of random words instead of random token ids), and the table says which one ran.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from engine.server.cluster import Cluster, ClusterConfig, find_router, router_missing_message
from teaching.live.metrics import fetch_metrics

REPO = Path(__file__).resolve().parents[1]
#: vLLM's benchmark client wrapper: $PREFIXLAB_VLLM_BENCH, else shared/tools/ beside the checkout (or above it).
BENCH_TOOL = Path(os.environ.get("PREFIXLAB_VLLM_BENCH") or next(
    (p / "shared" / "tools" / "vllm-bench-serve" for p in REPO.parents
     if (p / "shared" / "tools" / "vllm-bench-serve").exists()), REPO.parent / "shared" / "tools" / "vllm-bench-serve"))
VLLM_CPU_VENV = Path(os.environ.get("VLLM_CPU_VENV", Path.home() / ".cache" / "prefixlab-vllm" / "cpu-0.32.0"))
#: Policies of vllm-router -> the closest router of the trace replay (None: no counterpart).
PREDICTED_BY = {"round_robin": "round-robin", "consistent_hash": "random", "kv_aware": "blend",
                "cache_aware": "blend", "power_of_two": "least-loaded", "random": "random"}
BLOCK = 16
#: KV blocks per replica (null block included): three 256-token prefixes and the running requests fit.
NUM_BLOCKS = 64
#: Seeds the random router's prediction is averaged over.
RANDOM_SEEDS = 20


@dataclass
class Workload:
    num_prompts: int = 64
    num_prefixes: int = 8
    prefix_len: int = 256
    suffix_len: int = 32
    output_len: int = 16
    concurrency: int = 4
    seed: int = 0


def counters(url: str) -> dict[str, float]:
    """The replica's cumulative prefix-cache and request counters (vLLM's names, from its /metrics)."""
    seen = fetch_metrics(url, timeout_s=30.0)
    return {"queries": seen.prefix_cache_queries or 0.0, "hits": seen.prefix_cache_hits or 0.0,
            "requests": seen.requests_finished or 0.0}


def router_inputs(metrics_url: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(metrics_url, timeout=10) as response:
            lines = response.read().decode().splitlines()
    except OSError:
        return {}
    return {line.split("result=", 1)[1].split('"')[1]: float(line.rsplit(" ", 1)[1])
            for line in lines if line.startswith("vllm_router_kv_routing_inputs_total") and "result=" in line}


# -- the two clients ------------------------------------------------------------------------------------
def vllm_client_ready() -> bool:
    return BENCH_TOOL.exists() and (VLLM_CPU_VENV / "bin" / "python").exists()


def run_vllm_client(router_url: str, model: str, tokenizer: str, work: Workload, out: Path) -> dict:
    """vLLM's benchmark client through the router; its result JSON."""
    command = [str(BENCH_TOOL), router_url, model, tokenizer, str(out),
               "--num-prompts", str(work.num_prompts), "--max-concurrency", str(work.concurrency),
               "--prefix-repetition-prefix-len", str(work.prefix_len),
               "--prefix-repetition-suffix-len", str(work.suffix_len),
               "--prefix-repetition-num-prefixes", str(work.num_prefixes),
               "--prefix-repetition-output-len", str(work.output_len), "--seed", str(work.seed),
               "--metric-percentiles", "50,99"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=3600)
    data = json.loads(out.read_text())
    return {"ttft_p50_ms": data.get("p50_ttft_ms", data.get("median_ttft_ms")), "ttft_p99_ms": data.get("p99_ttft_ms"),
            "completed": data.get("completed")}


WORDS = ("cache block token prefix replica router page hash evict tree chain student room batch "
         "prompt decode prefill engine queue pool memory tensor layer head query key value").split()


def text_prompts(work: Workload) -> list[str]:
    """The prefix_repetition shape with words: ``num_prefixes`` shared prefixes, a unique suffix each, shuffled."""
    rng = random.Random(work.seed)
    words = lambda n: " ".join(rng.choice(WORDS) for _ in range(n))  # noqa: E731  (~1 token a word)
    prefixes = [words(work.prefix_len) for _ in range(work.num_prefixes)]
    prompts = [prefixes[i % work.num_prefixes] + " " + words(work.suffix_len) for i in range(work.num_prompts)]
    rng.shuffle(prompts)
    return prompts


def run_openai_client(router_url: str, model: str, work: Workload) -> dict:
    from openai import OpenAI

    api = OpenAI(base_url=router_url + "/v1", api_key="none", max_retries=0, timeout=600)

    def one(prompt: str) -> float:
        start = time.perf_counter()
        stream = api.completions.create(model=model, prompt=prompt, max_tokens=work.output_len, stream=True,
                                        extra_body={"ignore_eos": True})
        first = None
        for _ in stream:
            first = first or time.perf_counter()
        return ((first or time.perf_counter()) - start) * 1000

    with ThreadPoolExecutor(work.concurrency) as pool:
        ttfts = sorted(pool.map(one, text_prompts(work)))
    return {"ttft_p50_ms": statistics.median(ttfts), "ttft_p99_ms": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))],
            "completed": len(ttfts)}


# -- the prediction ---------------------------------------------------------------------------------------
def workload_trace(work: Workload) -> str:
    """The workload as a Mooncake-format trace for ``prefixlab trace replay``: one hash id per engine
    block, every token count scaled by ``TRACE_BLOCK_SIZE / BLOCK`` so one trace block stands for one
    16-token block (hit *rates* and block counts are then the engine's; the hashes stand for the tokens)."""
    from teaching.traces.loader import TRACE_BLOCK_SIZE

    scale = TRACE_BLOCK_SIZE // BLOCK
    rng = random.Random(work.seed)
    order = [i % work.num_prefixes for i in range(work.num_prompts)]
    rng.shuffle(order)  # vLLM's prefix_repetition shuffles its prompts too (its own order)
    prefix_blocks = work.prefix_len // BLOCK
    suffix_blocks = max(1, -(-work.suffix_len // BLOCK))
    next_id = work.num_prefixes * prefix_blocks
    lines = []
    for t, p in enumerate(order):
        ids = list(range(p * prefix_blocks, (p + 1) * prefix_blocks)) + list(range(next_id, next_id + suffix_blocks))
        next_id += suffix_blocks
        lines.append(json.dumps({"timestamp": t, "input_length": (work.prefix_len + work.suffix_len) * scale,
                                 "output_length": work.output_len * scale, "hash_ids": ids}))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Prediction:
    """The trace replay's token hit rate and load balance (max / mean requests); for the random router the
    mean over ``RANDOM_SEEDS`` seeds, with the lowest and highest hit rate (one real run is one draw)."""

    hit_rate: float
    balance: float
    hit_low: float
    hit_high: float


def predicted(trace_text: str, replicas: int, router: str, capacity_blocks: int) -> Prediction:
    """What ``prefixlab trace replay`` says: real ``KVCacheManager`` replicas of ``capacity_blocks`` usable
    blocks each, one request at a time."""
    from teaching.traces.loader import parse_trace
    from teaching.traces.replay import PreparedTrace, replay

    prepared = PreparedTrace(parse_trace(trace_text, "prefix_repetition"))
    runs = [replay(prepared, capacity_blocks=capacity_blocks, replicas=replicas, router=router, seed=seed)
            for seed in range(RANDOM_SEEDS if router == "random" else 1)]
    hits = [run.total.token_hit_rate for run in runs]
    balance = statistics.mean(run.load_balance()["requests_max_over_mean"] for run in runs)
    return Prediction(statistics.mean(hits), balance, min(hits), max(hits))


# -- one run -----------------------------------------------------------------------------------------------
def run_policy(cluster: Cluster, binary: str, policy: str, model: str, work: Workload, client: str,
               out_dir: Path) -> dict:
    """Empty caches, a fresh router with ``policy``, the workload through it; the replicas' counters' deltas."""
    cluster.reset_prefix_caches()
    before = [counters(r.url) for r in cluster.config.replica_list()]
    cluster.switch_policy(policy, binary)
    load_before = os.getloadavg()[0]
    try:
        time.sleep(1.0)  # the router's KV-event subscribers connect
        if client == "vllm":
            timing = run_vllm_client(cluster.config.router_url, model, _tokenizer_dir(model), work,
                                     out_dir / f"{policy}.json")
        else:
            timing = run_openai_client(cluster.config.router_url, model, work)
        inputs = router_inputs(f"http://{cluster.config.client_host}:{cluster.config.metrics_port}/metrics")
    finally:
        cluster.stop_router()
    after = [counters(r.url) for r in cluster.config.replica_list()]
    delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    queries, hits = sum(d["queries"] for d in delta), sum(d["hits"] for d in delta)
    requests = [d["requests"] for d in delta]
    mean = sum(requests) / len(requests) if requests else 0
    return {"policy": policy, **timing, "hit_rate": hits / queries if queries else 0.0,
            "requests_per_replica": requests, "load_balance": max(requests) / mean if mean else 0.0,
            "router_inputs": inputs, "load_average": (load_before, os.getloadavg()[0])}


def _tokenizer_dir(model: str) -> str:
    from engine.model.loader import resolve_model_folder

    return resolve_model_folder(model)


def table(rows: list[dict], work: Workload, replicas: int, client: str, num_blocks: int) -> str:
    lines = [f"K={replicas} replicas of {num_blocks} KV blocks ({BLOCK} tokens) each, {work.num_prompts} prompts, "
             f"{work.num_prefixes} prefixes x {work.prefix_len} tokens + {work.suffix_len}-token suffixes, "
             f"{work.output_len} output tokens, concurrency {work.concurrency}; client: {client}",
             "",
             "| policy | hit rate (replicas' /metrics) | predicted (trace replay router) | TTFT p50 ms | TTFT p99 ms "
             "| requests per replica | max/mean | predicted max/mean | router kv inputs | load average |",
             "|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in rows:
        inputs = ", ".join(f"{k} {v:.0f}" for k, v in r["router_inputs"].items()) or "-"
        low, high = r["predicted_range"]
        spread = f", {RANDOM_SEEDS} seeds: {low:.0%} to {high:.0%}" if high > low else ""
        lines.append(f"| {r['policy']} | {r['hit_rate']:.1%} | {r['predicted_hit_rate']:.1%} ({r['predicted_by']}{spread}) "
                     f"| {r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} | "
                     f"{' / '.join(f'{x:.0f}' for x in r['requests_per_replica'])} | {r['load_balance']:.2f} "
                     f"| {r['predicted_balance']:.2f} | {inputs} | {r['load_average'][0]:.1f} -> "
                     f"{r['load_average'][1]:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--policies", nargs="+", default=["round_robin", "consistent_hash", "kv_aware"])
    parser.add_argument("--client", choices=["auto", "vllm", "openai"], default="auto")
    parser.add_argument("--num-prompts", type=int, default=Workload.num_prompts)
    parser.add_argument("--num-prefixes", type=int, default=Workload.num_prefixes)
    parser.add_argument("--prefix-len", type=int, default=Workload.prefix_len)
    parser.add_argument("--suffix-len", type=int, default=Workload.suffix_len)
    parser.add_argument("--output-len", type=int, default=Workload.output_len)
    parser.add_argument("--concurrency", type=int, default=Workload.concurrency)
    parser.add_argument("--seed", type=int, default=Workload.seed)
    parser.add_argument("--port", type=int, default=8700, help="replica k on PORT + k; the router on PORT + 50")
    parser.add_argument("--events-port", type=int, default=6557)
    parser.add_argument("--num-blocks", type=int, default=NUM_BLOCKS,
                        help="KV pool per replica, null block included: small, so a replica holds a few prefixes")
    parser.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    binary = find_router()
    if binary is None:
        raise SystemExit(router_missing_message())
    client = args.client
    if client == "auto":
        client = "vllm" if vllm_client_ready() else "openai"
    if client == "vllm" and not vllm_client_ready():
        raise SystemExit(f"vLLM's benchmark client needs {BENCH_TOOL} and the venv {VLLM_CPU_VENV}.")
    work = Workload(args.num_prompts, args.num_prefixes, args.prefix_len, args.suffix_len, args.output_len,
                    args.concurrency, args.seed)
    config = ClusterConfig(replicas=args.replicas, port=args.port, router_port=args.port + 50,
                           events_port=args.events_port, replay_port=args.events_port + 100,
                           num_blocks=args.num_blocks)
    out_dir = Path(tempfile.mkdtemp(prefix="prefixlab-routing-"))
    trace = out_dir / "workload.jsonl"
    trace.write_text(workload_trace(work))
    cluster = Cluster(config, out_dir)
    rows = []
    try:
        print(f"Starting {args.replicas} replicas (logs in {out_dir})...", flush=True)
        cluster.start_replicas(env={"PYTHONPATH": str(REPO)})
        model = cluster.served_model()
        for policy in args.policies:
            print(f"{policy}: {work.num_prompts} requests through vllm-router ({client} client)...", flush=True)
            row = run_policy(cluster, binary, policy, model, work, client, out_dir)
            router = PREDICTED_BY.get(policy, "round-robin")
            guess = predicted(trace.read_text(), args.replicas, router, args.num_blocks - 1)
            row.update(predicted_hit_rate=guess.hit_rate, predicted_balance=guess.balance,
                       predicted_range=(guess.hit_low, guess.hit_high), predicted_by=router)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        cluster.stop()
    print(table(rows, work, args.replicas, client, args.num_blocks))
    print(f"\nThe prediction, from a shell: prefixlab trace replay {trace} --replicas {args.replicas} "
          f"--capacity-blocks {args.num_blocks - 1} --router ROUTER")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
