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

from engine.server.cluster import Cluster, ClusterConfig, find_router, router_missing_message, stop_group

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


@dataclass
class Workload:
    num_prompts: int = 48
    num_prefixes: int = 4
    prefix_len: int = 256
    suffix_len: int = 32
    output_len: int = 32
    concurrency: int = 8
    seed: int = 0


def counters(url: str) -> dict[str, float]:
    """The replica's cumulative prefix-cache and request counters."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    out = {"queries": 0.0, "hits": 0.0, "requests": 0.0}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == "vllm:prefix_cache_queries_total":
            out["queries"] += float(line.rsplit(" ", 1)[1])
        elif name == "vllm:prefix_cache_hits_total":
            out["hits"] += float(line.rsplit(" ", 1)[1])
        elif name == "vllm:request_success_total":
            out["requests"] += float(line.rsplit(" ", 1)[1])
    return out


def router_inputs(metrics_url: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(metrics_url, timeout=10) as response:
            lines = response.read().decode().splitlines()
    except OSError:
        return {}
    return {line.split("result=", 1)[1].split('"')[1]: float(line.rsplit(" ", 1)[1])
            for line in lines if line.startswith("vllm_router_kv_routing_inputs_total") and "result=" in line}


def reset_caches(cluster: Cluster) -> None:
    for replica in cluster.config.replica_list():
        request = urllib.request.Request(replica.url + "/reset_prefix_cache", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=60).read()


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
def predicted(work: Workload, replicas: int, router: str) -> tuple[float, float]:
    """(token hit rate, load balance) of the trace replay for the same workload shape, one hash id per
    16-token block (the hit *rate* does not depend on the tokens a block stands for)."""
    from teaching.traces.loader import TRACE_BLOCK_SIZE, parse_trace
    from teaching.traces.replay import replay

    rng = random.Random(work.seed)
    order = [i % work.num_prefixes for i in range(work.num_prompts)]
    rng.shuffle(order)
    prefix_blocks = work.prefix_len // BLOCK
    suffix_blocks = max(1, -(-work.suffix_len // BLOCK))
    next_id = work.num_prefixes * prefix_blocks
    lines = []
    for t, p in enumerate(order):
        ids = list(range(p * prefix_blocks, (p + 1) * prefix_blocks)) + list(range(next_id, next_id + suffix_blocks))
        next_id += suffix_blocks
        lines.append(json.dumps({"timestamp": t, "input_length": len(ids) * TRACE_BLOCK_SIZE,
                                 "output_length": work.output_len, "hash_ids": ids}))
    result = replay(parse_trace("\n".join(lines), "prefix_repetition"), replicas=replicas, router=router)
    return result.total.token_hit_rate, result.load_balance()["requests_max_over_mean"]


# -- one run -----------------------------------------------------------------------------------------------
def run_policy(cluster: Cluster, binary: str, policy: str, model: str, work: Workload, client: str,
               out_dir: Path) -> dict:
    cluster.config.policy = policy
    reset_caches(cluster)
    before = [counters(r.url) for r in cluster.config.replica_list()]
    cluster.start_router(binary)
    _, router_process, _ = cluster.processes[-1]
    try:
        time.sleep(1.0)
        if client == "vllm":
            tokenizer = _tokenizer_dir(model)
            timing = run_vllm_client(cluster.config.router_url, model, tokenizer, work, out_dir / f"{policy}.json")
        else:
            timing = run_openai_client(cluster.config.router_url, model, work)
        inputs = router_inputs(f"http://{cluster.config.client_host}:{cluster.config.metrics_port}/metrics")
    finally:
        stop_group(router_process)
        cluster.processes.pop()
    after = [counters(r.url) for r in cluster.config.replica_list()]
    delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    queries, hits = sum(d["queries"] for d in delta), sum(d["hits"] for d in delta)
    requests = [d["requests"] for d in delta]
    mean = sum(requests) / len(requests) if requests else 0
    return {"policy": policy, **timing, "hit_rate": hits / queries if queries else 0.0,
            "requests_per_replica": requests, "load_balance": max(requests) / mean if mean else 0.0,
            "router_inputs": inputs}


def _tokenizer_dir(model: str) -> str:
    from engine.model.loader import resolve_model_folder

    return resolve_model_folder(model)


def table(rows: list[dict], work: Workload, replicas: int, client: str) -> str:
    lines = [f"K={replicas} replicas, {work.num_prompts} prompts, {work.num_prefixes} prefixes x {work.prefix_len} "
             f"tokens + {work.suffix_len}-token suffixes, {work.output_len} output tokens, concurrency "
             f"{work.concurrency}; client: {client}",
             "",
             "| policy | hit rate (replicas' /metrics) | predicted (trace replay router) | TTFT p50 ms | TTFT p99 ms "
             "| requests per replica | load balance (max/mean) | predicted balance | router kv inputs |",
             "|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for r in rows:
        inputs = ", ".join(f"{k} {v:.0f}" for k, v in r["router_inputs"].items()) or "-"
        lines.append(f"| {r['policy']} | {r['hit_rate']:.1%} | {r['predicted_hit_rate']:.1%} ({r['predicted_by']}) "
                     f"| {r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} | "
                     f"{' / '.join(f'{x:.0f}' for x in r['requests_per_replica'])} | {r['load_balance']:.2f} "
                     f"| {r['predicted_balance']:.2f} | {inputs} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--policies", nargs="+", default=["round_robin", "consistent_hash", "kv_aware"])
    parser.add_argument("--client", choices=["auto", "vllm", "openai"], default="auto")
    parser.add_argument("--num-prompts", type=int, default=48)
    parser.add_argument("--num-prefixes", type=int, default=4)
    parser.add_argument("--prefix-len", type=int, default=256)
    parser.add_argument("--suffix-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--port", type=int, default=8700, help="replica k on PORT + k; the router on PORT + 50")
    parser.add_argument("--events-port", type=int, default=6557)
    parser.add_argument("--num-blocks", type=int, default=None)
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
                    args.concurrency)
    config = ClusterConfig(replicas=args.replicas, port=args.port, router_port=args.port + 50,
                           events_port=args.events_port, replay_port=args.events_port + 100,
                           num_blocks=args.num_blocks)
    out_dir = Path(tempfile.mkdtemp(prefix="prefixlab-routing-"))
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
            row["predicted_hit_rate"], row["predicted_balance"] = predicted(work, args.replicas, router)
            row["predicted_by"] = router
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        cluster.stop()
    print(table(rows, work, args.replicas, client))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
