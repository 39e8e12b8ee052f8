"""The real-vLLM half of ``bench/engine.py``: runs inside vLLM's own virtualenv, in a subprocess.

It imports nothing from PrefixLab (vLLM's venv has its own torch and transformers). It reads one
JSON job on stdin, runs it on ``vllm.LLM`` (the CPU build), and prints one JSON line on stdout:

* ``throughput``: all prompts at once, greedy, timed end to end, on an empty prefix cache;
* ``cached_ttft``: one request warms the cache with the shared prefix, then each probe prompt
  runs alone with ``max_tokens=1`` and is timed (wall clock of ``generate``);

with the generated token ids, so the caller can compare them token by token with PrefixLab's.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    job = json.loads(sys.stdin.read())
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; plenty for SmolLM2
    # Both cores, as PrefixLab's torch uses (vLLM's "auto" may keep one for its front end).
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    start = time.perf_counter()
    from vllm import LLM, SamplingParams, TokensPrompt

    llm = LLM(model=job["model"], dtype="float32", block_size=job["block_size"], enable_prefix_caching=True,
              max_model_len=job["max_model_len"], seed=0)
    startup = time.perf_counter() - start

    def run(prompts: list[list[int]], max_tokens: int) -> tuple[float, list[list[int]], list[int | None]]:
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        begin = time.perf_counter()
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        elapsed = time.perf_counter() - begin
        return elapsed, [list(o.outputs[0].token_ids) for o in outs], [o.num_cached_tokens for o in outs]

    run(job["prompts"][:1], 2)  # warm-up, untimed
    result: dict[str, object] = {"startup_s": startup, "throughput_s": [], "cached_ttft_s": [], "cached_tokens": []}
    for _ in range(job["repeats"]):
        llm.reset_prefix_cache()
        elapsed, tokens, _cached = run(job["prompts"], job["max_tokens"])
        result["throughput_s"].append(elapsed)  # type: ignore[attr-defined]
        result["outputs"] = tokens
        llm.reset_prefix_cache()
        run([job["warm"]], 1)
        for probe in job["probes"]:
            elapsed, _tokens, cached = run([probe], 1)
            result["cached_ttft_s"].append(elapsed)  # type: ignore[attr-defined]
            result["cached_tokens"].append(cached[0])  # type: ignore[attr-defined]
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
