"""One shared server vs one private engine per client: what a classroom gains by sharing.

Workload: N clients (1, 4, 16) each send one chat request that shares a long system prompt
and asks its own question, greedy, exactly ``--max-tokens`` output tokens (``ignore_eos``).

* **Shared**: one ``prefixlab serve`` subprocess (real HTTP, real ``openai`` async client,
  streaming); every client has its own API key, as students would. The engine batches all
  clients into the same steps and computes the system prompt once.
* **Private**: today's app design: N engines on the same loaded weights, one per client, each
  stepping its own request in its own thread (a Streamlit session each).

Reported per N: TTFT p50/p95, aggregate output tokens/s, and fairness = slowest / fastest
client's throughput. Then a **flood** check: 4 clients send requests one after another, with
and without a fifth client that fires bursts of concurrent requests; the flooder must get 429s
and the others' p95 TTFT must stay within 2x of the quiet run.

Both sides run in the same invocation, one after the other, on the same machine; the load
average is printed because a shared machine's noise moves absolute numbers (ratios less).
Run: ``python -m bench.serve [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.config import DEFAULT_MODEL
from engine.model import ModelBackend

from bench.prefix_cache import QUESTIONS, chat  # isort: skip
from bench.server_process import ServerProcess, start_server  # isort: skip

PRIVATE_NUM_BLOCKS = 96  # one session's pool: the prompt and its output fit with room to spare
FLOOD_BURST = 12  # concurrent requests the flooding client fires at once
FLOOD_CLIENTS = 4
FLOOD_ROUNDS = 3  # sequential requests per well-behaved client


@dataclass
class ClientResult:
    start: float
    first_token: float | None = None
    end: float | None = None
    tokens: int = 0
    error: str | None = None

    @property
    def ttft(self) -> float:
        assert self.first_token is not None
        return self.first_token - self.start

    @property
    def tokens_per_s(self) -> float:
        assert self.end is not None
        return self.tokens / (self.end - self.start)


def question(i: int) -> list[dict[str, str]]:
    return chat(f"{QUESTIONS[i % len(QUESTIONS)]} (asked by student {i})")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(results: list[ClientResult]) -> dict[str, float]:
    ok = [r for r in results if r.error is None]
    errors = len(results) - len(ok)
    if not ok:
        return {"errors": errors}
    ttfts = [r.ttft for r in ok]
    rates = [r.tokens_per_s for r in ok]
    wall = max(r.end for r in ok if r.end) - min(r.start for r in ok)
    return {
        "errors": errors,
        "ttft_p50": statistics.median(ttfts),
        "ttft_p95": percentile(ttfts, 0.95),
        "tok_s": sum(r.tokens for r in ok) / wall,
        "fairness": min(rates) / max(rates),
    }


# -- shared: through the HTTP API ----------------------------------------------------------------------
async def stream_one(api, messages: list[dict[str, str]], max_tokens: int) -> ClientResult:
    result = ClientResult(start=time.perf_counter())
    try:
        stream = await api.chat.completions.create(
            model=DEFAULT_MODEL, messages=messages, max_tokens=max_tokens, temperature=0, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
        )
        async for chunk in stream:
            if chunk.choices and result.first_token is None:
                result.first_token = time.perf_counter()
            if chunk.usage is not None:
                result.tokens = chunk.usage.completion_tokens
        result.end = time.perf_counter()
    except Exception as exc:  # counted and reported, never hidden
        result.error = f"{type(exc).__name__}: {exc}"
    return result


def client_for(server: ServerProcess, key: str):
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=600)


async def shared_run(server: ServerProcess, n: int, max_tokens: int) -> list[ClientResult]:
    clients = [client_for(server, f"bench-{i}") for i in range(n)]
    try:
        return list(await asyncio.gather(*(stream_one(c, question(i), max_tokens) for i, c in enumerate(clients))))
    finally:
        for c in clients:
            await c.close()


# -- private: one engine per client, each in its own thread ----------------------------------------------
def private_run(loaded, n: int, max_tokens: int) -> list[ClientResult]:
    config = EngineConfig(num_blocks=PRIVATE_NUM_BLOCKS)
    engines = [LLMEngine(config, backend=ModelBackend(config, loaded=loaded)) for _ in range(n)]
    results: list[ClientResult | None] = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        engine = engines[i]
        barrier.wait()
        result = ClientResult(start=time.perf_counter())
        engine.add_request(question(i), SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True))
        while engine.has_unfinished_requests():
            for out in engine.step():
                if result.first_token is None:
                    result.first_token = time.perf_counter()
                result.tokens = len(out.token_ids)
        result.end = time.perf_counter()
        results[i] = result

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


# -- flood: does one greedy client hurt the others? -------------------------------------------------------
async def flood_run(server: ServerProcess, max_tokens: int, flood: bool) -> tuple[list[ClientResult], dict[str, int]]:
    from openai import RateLimitError

    counts = {"flood_ok": 0, "flood_429": 0}
    stop = asyncio.Event()

    async def flooder() -> None:
        api = client_for(server, "bench-flooder")

        async def one(j: int) -> None:
            try:
                await api.chat.completions.create(model=DEFAULT_MODEL, messages=question(100 + j),
                                                  max_tokens=max_tokens, temperature=0)
                counts["flood_ok"] += 1
            except RateLimitError:
                counts["flood_429"] += 1

        while not stop.is_set():
            await asyncio.gather(*(one(j) for j in range(FLOOD_BURST)))
        await api.close()

    async def student(i: int) -> list[ClientResult]:
        api = client_for(server, f"bench-{i}")
        out = [await stream_one(api, question(i * FLOOD_ROUNDS + r), max_tokens) for r in range(FLOOD_ROUNDS)]
        await api.close()
        return out

    flood_task = asyncio.create_task(flooder()) if flood else None
    if flood_task:
        await asyncio.sleep(1.0)  # let the flood reach the server first
    per_student = await asyncio.gather(*(student(i) for i in range(FLOOD_CLIENTS)))
    stop.set()
    if flood_task:
        await flood_task
    return [r for rs in per_student for r in rs], counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1, 4 and fewer tokens")
    parser.add_argument("--clients", type=int, nargs="*", default=None, help="client counts (default 1 4 16)")
    parser.add_argument("--max-tokens", type=int, default=None, help="output tokens per request (default 32)")
    args = parser.parse_args()
    counts = args.clients or ([1, 4] if args.quick else [1, 4, 16])
    max_tokens = args.max_tokens or (16 if args.quick else 32)

    from engine.model.loader import load_model
    from engine.model.runner import pick_device, pick_dtype

    device = pick_device("auto")
    loaded = load_model(DEFAULT_MODEL, pick_dtype(None, device), device)
    keys = [arg for i in range(max(counts + [FLOOD_CLIENTS])) for arg in ("--api-key", f"bench-{i}")]
    server = start_server("--max-num-seqs", "64", *keys, "--api-key", "bench-flooder",
                          log_dir=Path(tempfile.mkdtemp(prefix="bench-serve-")), kv_events=False)
    try:
        asyncio.run(shared_run(server, 2, 4))  # warm-up: both sides run once before timing
        private_run(loaded, 1, 4)
        print(f"model {DEFAULT_MODEL}, {max_tokens} output tokens per request, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
        print("| clients | design | errors | TTFT p50 (s) | TTFT p95 (s) | output tok/s | fairness |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for n in counts:
            shared = summary(asyncio.run(shared_run(server, n, max_tokens)))
            private = summary(private_run(loaded, n, max_tokens))
            for name, s in (("shared server", shared), ("private engines", private)):
                print(f"| {n} | {name} | {s['errors']:.0f} | {s.get('ttft_p50', float('nan')):.2f} | "
                      f"{s.get('ttft_p95', float('nan')):.2f} | {s.get('tok_s', float('nan')):.1f} | "
                      f"{s.get('fairness', float('nan')):.2f} |", flush=True)
            if "tok_s" in shared and "tok_s" in private:
                print(f"|  | **shared / private** |  |  |  | **{shared['tok_s'] / private['tok_s']:.1f}x** |  |",
                      flush=True)

        quiet, _ = asyncio.run(flood_run(server, max_tokens, flood=False))
        loud, flood_counts = asyncio.run(flood_run(server, max_tokens, flood=True))
        q, lo = summary(quiet), summary(loud)
        print(f"\nflood: {FLOOD_CLIENTS} clients x {FLOOD_ROUNDS} requests; a fifth fires bursts of {FLOOD_BURST}: "
              f"{flood_counts['flood_429']} got 429, {flood_counts['flood_ok']} served")
        print(f"others' p95 TTFT: quiet {q['ttft_p95']:.2f} s, during the flood {lo['ttft_p95']:.2f} s "
              f"({lo['ttft_p95'] / q['ttft_p95']:.2f}x); errors {lo['errors']:.0f}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
