"""``prefixlab serve`` beside real vLLM's OpenAI server, both driven by vLLM's own benchmark client.

The workload is ``vllm bench serve``'s ``prefix_repetition`` dataset (by default 256-token prefixes
x 4, 32-token suffixes, 32 output tokens, 48 prompts, concurrency 8, ``--ignore-eos``, greedy), run
through the shared ``vllm-bench-serve`` tool (vLLM's ``vllm.benchmarks.serve`` in the ``vllm-env cpu``
venv). The two servers run one after the other in this one invocation, each alone on the machine, on
the same converted SmolLM2 folder, block size 32 (vLLM's CPU attention wants a multiple of 32), fp32;
with ``--repeat K`` the one that goes first alternates from round to round.

Printed as the README's Markdown table: output throughput, mean/median time per output token, TTFT
p50/p99, failed requests, each as PrefixLab / vLLM; then whether the greedy texts are equal prompt by
prompt (the client saves every generated text with ``--save-detailed``; both see the same prompts,
from the same seed). vLLM binds its threads to every core; PrefixLab is given the same cores
(``prefixlab serve --threads`` = every core) unless ``--prefixlab-threads N`` says otherwise (``0``: the
server's own rule, one thread while the machine looks busy).

Run: ``python -m bench.serve_vs_vllm [--num-prompts 48] [--concurrency 8] [--prefixlab-threads N] [--repeat K]``. The load average is
printed: on a shared machine absolute numbers drift, the ratios side by side much less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.server_process import REPO, free_ports, start_server
from bench.vllm_server import BLOCK_SIZE, SERVED_NAME, start_vllm, wait_healthy

#: The numbers compared, from vLLM's result JSON: (key, label, unit), each printed as PrefixLab / vLLM.
METRICS = (("output_throughput", "output tokens/s", ""), ("mean_tpot_ms", "time per output token, mean", " ms"),
           ("median_tpot_ms", "time per output token, p50", " ms"), ("median_ttft_ms", "TTFT p50", " ms"),
           ("p99_ttft_ms", "TTFT p99", " ms"), ("failed", "failed requests", ""))
#: Pool of each server, in blocks of BLOCK_SIZE tokens: room for every request in flight and their prefixes.
NUM_BLOCKS = 512


def vllm_env_dir() -> Path:
    root = os.environ.get("PREFIXLAB_VLLM_ENV_DIR")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "prefixlab-vllm"


def bench_tool() -> Path:
    """The shared ``vllm-bench-serve`` tool: ``$VLLM_BENCH_SERVE``, or the ``shared/tools`` folder beside the repository."""
    return Path(os.environ.get("VLLM_BENCH_SERVE", REPO.parent / "shared" / "tools" / "vllm-bench-serve"))


def run_client(base_url: str, model_name: str, tokenizer: str, out: Path, num_prompts: int, concurrency: int) -> dict:
    command = [str(bench_tool()), base_url, model_name, tokenizer, str(out), "--num-prompts", str(num_prompts),
               "--max-concurrency", str(concurrency), "--save-detailed", "--temperature", "0"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # vLLM's venv, not ours
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"vLLM's benchmark client failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return json.loads(out.read_text())


def bench_vllm(python: Path, folder: str, work: Path, args: argparse.Namespace) -> dict:
    http, events, replay = free_ports(3, "PREFIXLAB_BENCH_PORTS", "8300-8399")
    # fp32 as PrefixLab runs on the CPU, and every core for its kernels (its "auto" binding may keep one back).
    server = start_vllm(python, folder, http, events, replay, work / "vllm.log", num_blocks=NUM_BLOCKS,
                        max_model_len=2048, nice=0, extra_args=("--dtype", "float32"),
                        extra_env={"VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}"})
    try:
        if not wait_healthy(server):
            raise RuntimeError(f"vLLM did not start:\n{server.log_tail()}")
        return run_client(server.http, SERVED_NAME, folder, work / "vllm.json", args.num_prompts, args.concurrency)
    finally:
        server.stop()


def bench_prefixlab(folder: str, work: Path, args: argparse.Namespace) -> dict:
    # Every core, as vLLM's threads are bound to every core; --prefixlab-threads 0: the server's own rule.
    threads = ("--threads", str(args.prefixlab_threads)) if args.prefixlab_threads else ()
    server = start_server("--block-size", str(BLOCK_SIZE), "--num-blocks", str(NUM_BLOCKS), "--served-model-name",
                          SERVED_NAME, "--max-concurrent-per-client", "64", "--max-num-seqs", "64", *threads,
                          log_dir=work, kv_events=True, timeout_s=900)  # vLLM publishes its events too
    try:
        return run_client(server.url, SERVED_NAME, folder, work / "prefixlab.json", args.num_prompts, args.concurrency)
    finally:
        server.stop()


def report(ours: dict, theirs: dict) -> str:
    """The comparison as the README's Markdown table, then the greedy texts compared prompt by prompt."""
    lines = ["| | PrefixLab | vLLM | ratio |", "|---|---:|---:|---:|"]
    for key, label, unit in METRICS:
        a, b = float(ours.get(key, 0)), float(theirs.get(key, 0))
        digits = 1 if key in ("output_throughput", "mean_tpot_ms", "median_tpot_ms") else 0
        ratio = "" if key == "failed" else (f"{a / b:.2f}x" if b else "-")
        lines.append(f"| {label} | {a:,.{digits}f}{unit} | {b:,.{digits}f}{unit} | {ratio} |")
    texts_a, texts_b = ours.get("generated_texts", []), theirs.get("generated_texts", [])
    same = sum(a == b for a, b in zip(texts_a, texts_b, strict=False))
    lines.append(f"\nGreedy texts equal for {same} of {len(texts_b)} prompts.")
    for index, (a, b) in enumerate(zip(texts_a, texts_b, strict=False)):
        if a != b:
            lines.append(f"  prompt {index}: PrefixLab {a[-40:]!r} / vLLM {b[-40:]!r}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-prompts", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--prefixlab-threads", type=int, default=os.cpu_count() or 1,
                        help="PrefixLab's pass threads (`prefixlab serve --threads`); default: every core, as vLLM binds "
                             "its threads to every core; 0: the server's own rule (one thread while the machine is busy)")
    parser.add_argument("--repeat", type=int, default=1, help="run both servers this many times, in turns")
    args = parser.parse_args(argv)
    python = vllm_env_dir() / "cpu-0.32.0" / "bin" / "python"
    if not python.exists():
        print(f"No vLLM CPU venv at {python.parent.parent}: build it with the shared vllm-env tool (`vllm-env cpu`).",
              file=sys.stderr)
        return 2
    if not bench_tool().exists():
        print(f"vLLM's benchmark client tool is not at {bench_tool()}; set VLLM_BENCH_SERVE.", file=sys.stderr)
        return 2
    from engine.config import DEFAULT_MODEL
    from engine.model.loader import resolve_model_folder

    folder = resolve_model_folder(DEFAULT_MODEL)
    ratios: list[tuple[float, float]] = []
    for round_ in range(1, args.repeat + 1):
        with tempfile.TemporaryDirectory(prefix="serve-vs-vllm-") as tmp:
            work = Path(tmp)
            load = os.getloadavg()
            started = time.perf_counter()
            # Turns alternate (vLLM first in odd rounds, PrefixLab first in even ones): a server that always
            # ran second would always meet what the first one left behind on the machine.
            first = "vLLM" if round_ % 2 else "PrefixLab"
            if round_ % 2:
                theirs = bench_vllm(python, folder, work, args)
                ours = bench_prefixlab(folder, work, args)
            else:
                ours = bench_prefixlab(folder, work, args)
                theirs = bench_vllm(python, folder, work, args)
            print(f"{'' if args.repeat == 1 else f'Round {round_} of {args.repeat} ({first} first): '}{args.num_prompts} prompts, "
                  f"concurrency {args.concurrency}, PrefixLab threads {args.prefixlab_threads or 'by load'}; load average "
                  f"before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}; {time.perf_counter() - started:.0f} s", flush=True)
            print(report(ours, theirs), flush=True)
            ratios.append((ours["output_throughput"] / theirs["output_throughput"], ours["mean_tpot_ms"] / theirs["mean_tpot_ms"]))
    if args.repeat > 1:
        print(summary(ratios))
    return 0


def summary(ratios: list[tuple[float, float]]) -> str:
    """Each round's two ratios, and their medians (one noisy round says little on a shared machine)."""
    throughput, tpot = [r[0] for r in ratios], [r[1] for r in ratios]
    return (f"\nOutput throughput, PrefixLab / vLLM: {', '.join(f'{r:.2f}x' for r in throughput)} "
            f"(median {statistics.median(throughput):.2f}x)\n"
            f"Time per output token, PrefixLab / vLLM: {', '.join(f'{r:.2f}x' for r in tpot)} "
            f"(median {statistics.median(tpot):.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
