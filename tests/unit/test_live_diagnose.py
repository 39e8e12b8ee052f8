"""What the Live page says about a silent connection, and the commands it offers."""

from __future__ import annotations

import json
import shlex

from engine.server.config import KVEventsConfig
from teaching.live.diagnose import SILENCE_S, silence_advice, start_commands
from teaching.live.metrics import ServerMetrics
from teaching.live.subscriber import Endpoint

ENDPOINT = Endpoint("class", "tcp://teacher-laptop:5567", "tcp://teacher-laptop:5568", "http://teacher-laptop:8100")


def served(requests: int) -> ServerMetrics:
    return ServerMetrics(prefix_cache_queries=100, prefix_cache_hits=0, kv_cache_usage=0.1, requests_running=0,
                         requests_waiting=0, ttft_count=requests, ttft_sum=0.5)


def test_nothing_is_said_before_the_silence_lasts_or_once_events_came() -> None:
    assert silence_advice(ENDPOINT, silent_s=SILENCE_S - 1, frames_seen=0, connected=False) is None
    assert silence_advice(ENDPOINT, silent_s=600, frames_seen=1, connected=True) is None


def test_no_connection_names_the_port_and_the_bind_rule() -> None:
    advice = silence_advice(ENDPOINT, silent_s=20, frames_seen=0, connected=False)
    assert advice is not None and "nothing publishes at tcp://teacher-laptop:5567" in advice.headline
    assert any("tcp://*:5567" in check and "bind" in check for check in advice.checks)


def test_a_server_that_answered_but_published_nothing_points_at_config_and_topic() -> None:
    advice = silence_advice(ENDPOINT, silent_s=20, frames_seen=0, connected=True, metrics=served(3))
    assert advice is not None and "answered 3 requests but published no KV events" in advice.headline
    assert any("enable_kv_cache_events" in c for c in advice.checks) and any("topic" in c for c in advice.checks)


def test_connected_without_requests_says_to_send_one() -> None:
    advice = silence_advice(ENDPOINT, silent_s=20, frames_seen=0, connected=True, metrics=served(0))
    assert advice is not None and "connected to" in advice.headline and "send a request" in advice.checks[0]


def test_the_commands_publish_where_the_page_listens_and_the_config_parses() -> None:
    prefixlab, vllm = start_commands(ENDPOINT)
    for command in (prefixlab, vllm):
        words = shlex.split(command)
        config = json.loads(words[words.index("--kv-events-config") + 1])
        assert config["endpoint"] == "tcp://*:5567" and config["replay_endpoint"] == "tcp://*:5568"
        assert config["enable_kv_cache_events"] is True and config["publisher"] == "zmq"
        assert words[words.index("--port") + 1] == "8100"
    assert prefixlab.startswith("prefixlab serve ") and vllm.startswith("vllm serve ")
    parsed = KVEventsConfig.from_json(shlex.split(prefixlab)[-1])  # prefixlab serve accepts it as is
    assert parsed.endpoint == "tcp://*:5567"
