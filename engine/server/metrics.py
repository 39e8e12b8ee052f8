"""``GET /metrics``: Prometheus text, with vLLM's metric names so vLLM's dashboards read it.

Only what PrefixLab can measure honestly is exported: requests running and waiting, KV-cache
usage, prefix-cache queries and hits (in tokens, as vLLM counts them), prompt and generated
tokens, finished requests by reason, admission rejections, and the time-to-first-token
histogram (vLLM's buckets). Counters only grow: a cache reset zeroes the cache's own stats,
so this module adds up their increments instead of reading them raw.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from dataclasses import dataclass

from engine.server.residency import KV_CACHE_RESIDENCY_BUCKETS, Eviction

#: vLLM's time-to-first-token buckets (seconds).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # last: above every bound (+Inf only)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1


RESIDENCY_FAMILIES = {
    "vllm:kv_block_lifetime_seconds": "Histogram of KV cache block lifetime from allocation to eviction.",
    "vllm:kv_block_idle_before_evict_seconds": "Histogram of idle time before KV cache block eviction.",
    "vllm:kv_block_reuse_gap_seconds": "Histogram of time gaps between consecutive KV cache block accesses.",
}


def histogram_lines(lines: list[str], name: str, labels: str, histogram: Histogram) -> None:
    """Prometheus' cumulative ``_bucket`` lines, then ``_count`` and ``_sum``."""
    cumulative = 0
    for bound, count in zip(histogram.buckets, histogram.counts):
        cumulative += count
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {histogram.count}')
    lines.append(f"{name}_count{{{labels}}} {histogram.count}")
    lines.append(f"{name}_sum{{{labels}}} {histogram.sum}")


@dataclass
class Gauges:
    """What the engine looks like right now (read when /metrics is scraped)."""

    running: int
    waiting: int
    kv_cache_usage: float


class ServerMetrics:
    def __init__(self, model_name: str) -> None:
        self.labels = f'model_name="{model_name}",engine="0"'
        self.model_name = model_name
        self.ttft = Histogram(TTFT_BUCKETS)
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished: Counter[str] = Counter()
        self.rejections: Counter[str] = Counter()
        self._last_cache_stats = (0, 0)
        self._lock = threading.Lock()
        # The offload tier (vLLM's connector counters), when it is on: a snapshot of its running totals.
        self.external: tuple[int, int, dict[str, int]] | None = None
        # vLLM's block residency histograms, when --kv-cache-metrics is on.
        self.residency: dict[str, Histogram] | None = None

    def enable_residency(self) -> None:
        self.residency = {name: Histogram(KV_CACHE_RESIDENCY_BUCKETS) for name in RESIDENCY_FAMILIES}

    def observe_external(self, queries: int, hits: int, by_source: dict[str, int]) -> None:
        with self._lock:
            self.external = (queries, hits, dict(by_source))

    def observe_evictions(self, evictions: list[Eviction]) -> None:
        if self.residency is None or not evictions:
            return
        with self._lock:
            for ev in evictions:
                self.residency["vllm:kv_block_lifetime_seconds"].observe(ev.lifetime_s)
                self.residency["vllm:kv_block_idle_before_evict_seconds"].observe(ev.idle_s)
                for gap in ev.reuse_gaps_s:
                    self.residency["vllm:kv_block_reuse_gap_seconds"].observe(gap)

    # -- updates (engine thread) -------------------------------------------------------------------
    def observe_cache_stats(self, queries: int, hits: int) -> None:
        """Add what the cache's own counters grew by since the last call (they restart at a reset)."""
        last_q, last_h = self._last_cache_stats
        if queries < last_q or hits < last_h:
            last_q = last_h = 0
        with self._lock:
            self.prefix_cache_queries += queries - last_q
            self.prefix_cache_hits += hits - last_h
        self._last_cache_stats = (queries, hits)

    def observe_first_token(self, ttft_s: float, num_prompt_tokens: int) -> None:
        with self._lock:
            self.ttft.observe(ttft_s)
            self.prompt_tokens += num_prompt_tokens

    def observe_tokens(self, num_tokens: int) -> None:
        with self._lock:
            self.generation_tokens += num_tokens

    def observe_finished(self, reason: str) -> None:
        with self._lock:
            self.finished[reason] += 1

    def observe_rejection(self, reason: str) -> None:
        with self._lock:
            self.rejections[reason] += 1

    # -- the text format ---------------------------------------------------------------------------
    def render(self, gauges: Gauges) -> str:
        lines: list[str] = []
        labels = self.labels

        def family(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        with self._lock:
            family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
            lines.append(f"vllm:num_requests_running{{{labels}}} {gauges.running}")
            family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
            lines.append(f"vllm:num_requests_waiting{{{labels}}} {gauges.waiting}")
            family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
            lines.append(f"vllm:kv_cache_usage_perc{{{labels}}} {gauges.kv_cache_usage}")
            for name, value, help_text in (
                ("vllm:prefix_cache_queries", self.prefix_cache_queries,
                 "Prefix cache queries, in terms of number of queried tokens."),
                ("vllm:prefix_cache_hits", self.prefix_cache_hits,
                 "Prefix cache hits, in terms of number of cached tokens."),
                ("vllm:prompt_tokens", self.prompt_tokens, "Number of prefill tokens processed."),
                ("vllm:generation_tokens", self.generation_tokens, "Number of generation tokens processed."),
            ):
                family(name, "counter", help_text)
                lines.append(f"{name}_total{{{labels}}} {value}")
            family("vllm:request_success", "counter", "Count of successfully processed requests.")
            for reason in ("stop", "length", "abort"):
                lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {self.finished[reason]}')
            family("vllm:admission_rejections", "counter", "Number of admission attempts rejected by a queue limit, by reason.")
            for reason, count in sorted(self.rejections.items()):
                lines.append(f'vllm:admission_rejections_total{{model_name="{self.model_name}",reason="{reason}"}} {count}')
            family("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.")
            histogram_lines(lines, "vllm:time_to_first_token_seconds", labels, self.ttft)
            if self.external is not None:
                queries, hits, by_source = self.external
                family("vllm:external_prefix_cache_queries", "counter",
                       "External prefix cache queries from KV connector, in terms of number of queried tokens.")
                lines.append(f"vllm:external_prefix_cache_queries_total{{{labels}}} {queries}")
                family("vllm:external_prefix_cache_hits", "counter",
                       "External prefix cache hits from KV connector, in terms of number of cached tokens.")
                lines.append(f"vllm:external_prefix_cache_hits_total{{{labels}}} {hits}")
                family("vllm:prompt_tokens_by_source", "counter", "Number of prompt tokens by source.")
                for source, count in by_source.items():
                    lines.append(f'vllm:prompt_tokens_by_source_total{{{labels},source="{source}"}} {count}')
            for name, histogram in (self.residency or {}).items():
                family(name, "histogram", RESIDENCY_FAMILIES[name])
                histogram_lines(lines, name, labels, histogram)
        return "\n".join(lines) + "\n"
