"""Say what is wrong when a Live connection stays silent, and how to start a server that publishes.

A subscriber that hears nothing cannot tell "no server" from "a server without KV events" from
"events on another port": ZMQ reconnects quietly forever. After :data:`SILENCE_S` seconds with no
batch, the page shows the advice :func:`silence_advice` picks from what it does know: whether the
socket connected, and whether the server's ``/metrics`` says it answered requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlparse

from teaching.live.metrics import ServerMetrics
from teaching.live.subscriber import Endpoint

#: Seconds without a single event batch before the page says what to check.
SILENCE_S = 15.0
DEFAULT_EVENTS_PORT = 5557


@dataclass(frozen=True)
class Advice:
    """What the page says for one silent server: a headline, what to check, commands that work."""

    server: str
    headline: str
    checks: list[str]
    prefixlab_command: str
    vllm_command: str


def _port(address: str, default: int) -> int:
    try:
        return urlparse(address).port or default
    except ValueError:
        return default


def kv_events_config(events: str, replay: str | None = None, topic: str = "kv") -> str:
    """The ``--kv-events-config`` JSON that publishes where this page listens (bound on every interface)."""
    port = _port(events, DEFAULT_EVENTS_PORT)
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{port}",
              "replay_endpoint": f"tcp://*:{_port(replay, port + 1) if replay else port + 1}", "topic": topic}
    return json.dumps(config, separators=(",", ":"))


def start_commands(endpoint: Endpoint) -> tuple[str, str]:
    """``prefixlab serve`` and ``vllm serve`` command lines whose events reach ``endpoint``."""
    config = kv_events_config(endpoint.events, endpoint.replay, endpoint.topic or "kv")
    http_port = _port(endpoint.http, 8000) if endpoint.http else 8000
    return (f"prefixlab serve --port {http_port} --kv-events-config '{config}'",
            f"vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --port {http_port} --kv-events-config '{config}'")


def requests_answered(metrics: ServerMetrics | None) -> int:
    """Requests the server says it answered (its TTFT histogram's count); 0 when unknown."""
    if metrics is None or not metrics.ttft_count:
        return 0
    return int(metrics.ttft_count)


def silence_advice(endpoint: Endpoint, *, silent_s: float, frames_seen: int, connected: bool,
                   metrics: ServerMetrics | None = None, silence_s: float = SILENCE_S) -> Advice | None:
    """Advice for a server that sent no batch for ``silent_s`` seconds; None while there is nothing to say."""
    if frames_seen > 0 or silent_s < silence_s:
        return None
    prefixlab, vllm = start_commands(endpoint)
    port = _port(endpoint.events, DEFAULT_EVENTS_PORT)
    answered = requests_answered(metrics)
    topic = ("this page listens to every topic" if not endpoint.topic
             else f"this page listens to topic {endpoint.topic!r}: the server's \"topic\" must match")
    if answered:
        headline = (f"{endpoint.name} answered {answered} requests but published no KV events here "
                    f"in {silent_s:.0f} s.")
        checks = ["its `--kv-events-config` has `\"enable_kv_cache_events\": true` and `\"publisher\": \"zmq\"`",
                  f"its `\"endpoint\"` is `tcp://*:{port}` (the port given here; a host name instead of `*` "
                  "makes vLLM's publisher connect instead of bind)",
                  f"the topic: {topic}",
                  "prefix caching is on (vLLM: no `--no-enable-prefix-caching`)"]
    elif connected:
        headline = f"{endpoint.name}: connected to {endpoint.events}, but no KV events in {silent_s:.0f} s."
        checks = ["a server publishes only when its cache changes: send a request (the form below, `curl`, the "
                  "Playground)",
                  "if requests went through and still nothing: its `--kv-events-config` and its topic "
                  f"({topic})",
                  f"that port {port} is the server's KV-event endpoint, not its HTTP port"]
    else:
        headline = f"{endpoint.name}: nothing publishes at {endpoint.events} ({silent_s:.0f} s without a connection)."
        checks = ["the server is running, started with KV events (`--kv-events-config`, below)",
                  f"the port: the server's `\"endpoint\"` must be `tcp://*:{port}`; a host name instead of `*` "
                  "makes vLLM's publisher connect instead of bind, so nobody listens",
                  "the host: a firewall or another machine's address",
                  f"the topic: {topic}"]
    return Advice(endpoint.name, headline, checks, prefixlab, vllm)
