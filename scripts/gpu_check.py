"""The CUDA path, checked on a machine with a GPU: same code as on the CPU, device-agnostic.

1. fp32 on CUDA: the 8 shared-prefix chat prompts of the benchmarks, batched, caching on, then the
   cached-prefix probes: greedy tokens must equal transformers' ``generate`` on the same GPU weights.
2. bf16 on CUDA (the default there): agreement with transformers in bf16, reported, not asserted
   (bf16 sums in a different order can flip a near-tie).
3. Decode tokens/s at batch 1, 16 and 64 and a 2048-token prefill, in fp32 and bf16.

Run: ``python scripts/gpu_check.py`` (exits non-zero if the fp32 check fails).
"""

from __future__ import annotations

import sys
import time

import torch

from bench.engine import DECODE_PROMPT_TOKENS, engine_on, synthetic_prompt
from bench.prefix_cache import QUESTIONS, chat, transformers_throughput
from engine import EngineConfig, LLMEngine, SamplingParams
from engine.model import ModelBackend


def agreement(dtype: str) -> tuple[int, int, ModelBackend]:
    backend = ModelBackend(EngineConfig(device="cuda", dtype=dtype))
    prompts = [backend.apply_chat_template(chat(q)) for q in QUESTIONS[:8]]
    engine = engine_on(backend, EngineConfig(device="cuda", dtype=dtype))
    ours = [o.token_ids for o in engine.generate(prompts, SamplingParams(max_tokens=32))]
    probes = [o.token_ids for o in engine.generate(prompts[:3], SamplingParams(max_tokens=32))]  # now cached
    _, theirs = transformers_throughput(backend.hf_model, prompts, 32, backend.eos_token_ids)
    same = sum(a == b for a, b in zip(ours, theirs)) + sum(a == b for a, b in zip(probes, theirs[:3]))
    return same, len(ours) + len(probes), backend


def decode_speed(backend: ModelBackend, batch: int, steps: int = 32) -> float:
    engine = engine_on(backend, EngineConfig(enable_prefix_caching=False, max_num_batched_tokens=batch * DECODE_PROMPT_TOKENS),
                       backend=backend)
    ids = [engine.add_request(synthetic_prompt(DECODE_PROMPT_TOKENS, b), SamplingParams(max_tokens=steps + 2, ignore_eos=True))
           for b in range(batch)]
    while any(engine.metrics[i].first_token_time is None for i in ids):
        engine.step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        engine.step()  # sampling reads the tokens back to the host: every step synchronises
    return batch * steps / (time.perf_counter() - start)


def main() -> int:
    if not torch.cuda.is_available():
        print("No CUDA GPU here: nothing to check.")
        return 2
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    failed = False
    for dtype in ("float32", "bfloat16"):
        same, total, backend = agreement(dtype)
        print(f"{dtype}: greedy outputs equal to transformers' for {same} of {total} requests")
        failed |= dtype == "float32" and same != total
        for batch in (1, 16, 64):
            print(f"  decode batch {batch}: {decode_speed(backend, batch):.0f} tokens/s")
        engine = LLMEngine(EngineConfig(device="cuda", dtype=dtype, enable_prefix_caching=False))
        out = engine.generate([synthetic_prompt(2048, 1)], SamplingParams(max_tokens=1))[0]
        assert out.metrics is not None
        print(f"  prefill of 2048 tokens: {2048 / out.metrics.prefill_time:.0f} tokens/s")
        del backend, engine
        torch.cuda.empty_cache()
    print("FAILED: fp32 outputs differ from transformers" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
