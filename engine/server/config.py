"""Server settings: classroom limits, API keys, and vLLM's KV-events config.

Every default lives here, once. The limits keep one student from starving the room: a cap on
prompt length and on ``max_tokens`` (work per request), a cap on requests in flight per client
(work per person), and a timeout (work per request in time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from engine.errors import ConfigError

DEFAULT_HOST = "0.0.0.0"  # vLLM's default: every interface, so students can reach it
DEFAULT_PORT = 8000
DEFAULT_KV_EVENTS_ENDPOINT = "tcp://*:5557"  # vLLM's default


@dataclass
class ServerLimits:
    max_prompt_tokens: int = 2048
    max_tokens: int = 256  # cap on max_tokens; also the chat default when a request gives none
    default_completion_max_tokens: int = 16  # OpenAI's default for /v1/completions
    max_concurrent_per_client: int = 4  # queued + running, per API key (or per address without keys)
    request_timeout_s: float = 120.0
    max_stop_strings: int = 8

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) <= 0:
                raise ConfigError(f"{f.name} must be positive, got {getattr(self, f.name)!r}.")


@dataclass
class KVEventsConfig:
    """vLLM's ``--kv-events-config`` JSON, same keys and defaults."""

    enable_kv_cache_events: bool = False
    publisher: str | None = None  # "zmq" or "null"; None: zmq when enabled
    endpoint: str = DEFAULT_KV_EVENTS_ENDPOINT
    replay_endpoint: str | None = None
    buffer_steps: int = 10_000
    hwm: int = 100_000
    max_queue_size: int = 100_000
    topic: str = ""

    def __post_init__(self) -> None:
        if self.publisher is None:
            self.publisher = "zmq" if self.enable_kv_cache_events else "null"
        if self.publisher not in ("zmq", "null"):
            raise ConfigError(f"Unknown KV-event publisher {self.publisher!r}; use 'zmq' or 'null'.")
        if self.buffer_steps < 1 or self.hwm < 0 or self.max_queue_size < 1:
            raise ConfigError("buffer_steps and max_queue_size must be >= 1, hwm >= 0.")

    @property
    def enabled(self) -> bool:
        return self.enable_kv_cache_events and self.publisher == "zmq"

    @classmethod
    def from_json(cls, text: str | None) -> KVEventsConfig:
        """Parse the flag's JSON, naming the bad key instead of failing with a traceback."""
        if not text:
            return cls()
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--kv-events-config is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError("--kv-events-config must be a JSON object.")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"Unknown --kv-events-config keys {unknown}; known: {sorted(known)}.")
        return cls(**data)


@dataclass
class ServerConfig:
    model: str
    served_model_name: str
    limits: ServerLimits = field(default_factory=ServerLimits)
    kv_events: KVEventsConfig = field(default_factory=KVEventsConfig)
    student_keys: frozenset[str] = frozenset()
    teacher_key: str | None = None
    cache_salt_policy: str = "bound"  # engine/server/salt.py: a student's salt belongs to its key
    #: vLLM's ``--kv-cache-metrics-sample`` when ``--kv-cache-metrics`` is on; None: no residency histograms.
    kv_cache_metrics_sample: float | None = None

    def __post_init__(self) -> None:
        sample = self.kv_cache_metrics_sample
        if sample is not None and not 0 < sample <= 1:
            raise ConfigError(f"--kv-cache-metrics-sample must be in (0, 1], got {sample!r}.")

    @property
    def requires_key(self) -> bool:
        return bool(self.student_keys or self.teacher_key)
