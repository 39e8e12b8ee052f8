"""A server's ``/metrics`` (Prometheus text format) read into the numbers the Live page shows.

Names are vLLM's (PrefixLab's server uses the same ones where they exist). vLLM counts prefix-cache
*queries* and *hits* in tokens, so hit rate = hits / queries; KV usage is a fraction in [0, 1].
Counters get a ``_total`` suffix from the Prometheus client; both spellings are accepted.
"""

from __future__ import annotations

import math
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from engine.errors import PrefixLabError

#: One HTTP read of /metrics may not take longer than this (the page refreshes every second).
METRICS_TIMEOUT_S = 2.0
MAX_METRICS_BYTES = 4 * 2**20

PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits"
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # new name first
REQUESTS_RUNNING = "vllm:num_requests_running"
REQUESTS_WAITING = "vllm:num_requests_waiting"
TTFT_SECONDS = "vllm:time_to_first_token_seconds"
PROMPT_TOKENS = "vllm:prompt_tokens"
REQUEST_SUCCESS = "vllm:request_success"

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


class MetricsError(PrefixLabError):
    """/metrics could not be fetched or read."""


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum of every sample per metric name (labels summed over: one model, possibly several engines)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, raw = match.groups()
        try:
            value = float(raw)
        except ValueError:
            continue
        if math.isnan(value):
            continue
        if name.endswith("_bucket"):  # keep only the +Inf bucket: it equals the count
            if labels is None or 'le="+Inf"' not in labels:
                continue
        totals[name] = totals.get(name, 0.0) + value
    return totals


def _counter(samples: dict[str, float], name: str) -> float | None:
    for candidate in (name + "_total", name):
        if candidate in samples:
            return samples[candidate]
    return None


@dataclass(frozen=True)
class ServerMetrics:
    """The few numbers the page draws, from one scrape."""

    prefix_cache_queries: float | None
    prefix_cache_hits: float | None
    kv_cache_usage: float | None
    requests_running: float | None
    requests_waiting: float | None
    ttft_count: float | None
    ttft_sum: float | None
    prompt_tokens: float | None = None  # every prompt token the server was sent, cached or not
    requests_finished: float | None = None  # vllm:request_success, every finish reason

    @property
    def hit_rate(self) -> float | None:
        if not self.prefix_cache_queries or self.prefix_cache_hits is None:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    @property
    def mean_ttft_s(self) -> float | None:
        if not self.ttft_count or self.ttft_sum is None:
            return None
        return self.ttft_sum / self.ttft_count

    def hit_rate_since(self, earlier: ServerMetrics) -> float | None:
        """Hit rate of the tokens queried between two scrapes (what just happened, not since start)."""
        if None in (self.prefix_cache_queries, self.prefix_cache_hits, earlier.prefix_cache_queries,
                    earlier.prefix_cache_hits):
            return None
        queries = self.prefix_cache_queries - earlier.prefix_cache_queries  # type: ignore[operator]
        hits = self.prefix_cache_hits - earlier.prefix_cache_hits  # type: ignore[operator]
        return hits / queries if queries > 0 else None


def server_metrics(samples: dict[str, float]) -> ServerMetrics:
    usage = next((samples[name] for name in KV_CACHE_USAGE if name in samples), None)
    return ServerMetrics(
        prefix_cache_queries=_counter(samples, PREFIX_CACHE_QUERIES),
        prefix_cache_hits=_counter(samples, PREFIX_CACHE_HITS),
        kv_cache_usage=usage,
        requests_running=samples.get(REQUESTS_RUNNING),
        requests_waiting=samples.get(REQUESTS_WAITING),
        ttft_count=samples.get(TTFT_SECONDS + "_count"),
        ttft_sum=samples.get(TTFT_SECONDS + "_sum"),
        prompt_tokens=_counter(samples, PROMPT_TOKENS),
        requests_finished=_counter(samples, REQUEST_SUCCESS),
    )


def fetch_metrics(base_url: str, timeout_s: float = METRICS_TIMEOUT_S) -> ServerMetrics:
    """Scrape ``{base_url}/metrics``; a clear :class:`MetricsError` when the server is not there."""
    url = base_url.rstrip("/") + "/metrics"
    if not url.startswith(("http://", "https://")):
        raise MetricsError(f"{base_url!r} is not an http(s) URL")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read(MAX_METRICS_BYTES).decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise MetricsError(f"cannot read {url}: {getattr(exc, 'reason', exc)}") from None
    return server_metrics(parse_prometheus(text))
