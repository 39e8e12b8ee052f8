"""PrefixLab's own class server watched live, and the Playground's class-server client against it."""

from __future__ import annotations

import pytest

from teaching.live.client import ClassServerError, send_chat, send_prompt
from teaching.live.metrics import fetch_metrics
from teaching.live.session import LiveSession
from teaching.live.subscriber import Endpoint
from teaching.pages.playground import CHAT, TEXT, build_prompt
from tests.live.conftest import chat_prompt_ids
from tests.live.serve_process import BLOCK_SIZE, class_server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow  # the server runs the real default model

SYSTEM = "You are the class tutor. You answer in one short sentence about blocks of the KV cache. " * 2


def chunks(ids: list[int]) -> list[tuple[int, ...]]:
    return [tuple(ids[i:i + BLOCK_SIZE]) for i in range(0, len(ids) - BLOCK_SIZE + 1, BLOCK_SIZE)]


def test_playground_prompts_hit_the_class_servers_cache_and_the_view_shows_them(class_server, hf_tokenizer):  # noqa: F811
    session = LiveSession([Endpoint("class", class_server.events, class_server.replay, class_server.http,
                                    topic="kv")]).start()
    try:
        assert session.wait_for(lambda s: s.subscribers[0].expected_seq is not None, 30)
        first = send_prompt(class_server.http, build_prompt(CHAT, "What is a block?", SYSTEM), max_tokens=4)
        second = send_prompt(class_server.http, build_prompt(CHAT, "What is a hash?", SYSTEM), max_tokens=4)
        text = send_prompt(class_server.http, build_prompt(TEXT, "Once upon a time in a small bakery by the sea"),
                           max_tokens=4)
        assert first.text and second.text and text.text
        assert first.cached_tokens == 0 and (second.cached_tokens or 0) >= BLOCK_SIZE
        assert first.ttft_s is not None and first.ttft_s <= first.total_s

        prompts = [chat_prompt_ids(hf_tokenizer, build_prompt(CHAT, q, SYSTEM))  # type: ignore[arg-type]
                   for q in ("What is a block?", "What is a hash?")]
        wanted = {c for p in prompts for c in chunks(p)}
        assert session.wait_for(lambda s: wanted <= {b.token_ids for b in s.state.replica("class").blocks.values()},
                                30), "the live view is missing blocks of a prompt the server cached"
        replica = session.state.replica("class")
        assert replica.block_size == BLOCK_SIZE
        for prompt in prompts:  # each prompt's full blocks: one path from a root
            last = next(b for b in replica.blocks.values() if b.token_ids == chunks(prompt)[-1])
            assert [b.token_ids for b in replica.prefix_of(last.block_hash)] == chunks(prompt)
        assert [f.seq for f in session.recording] == list(range(len(session.recording)))

        metrics = fetch_metrics(class_server.http)
        assert metrics.prefix_cache_hits and metrics.prefix_cache_hits >= (second.cached_tokens or 0)
        assert metrics.hit_rate is not None and 0 < metrics.hit_rate < 1
    finally:
        session.stop()


def test_the_class_servers_refusals_read_as_clear_errors(class_server):  # noqa: F811
    with pytest.raises(ClassServerError, match="refused the request \\(404\\)"):
        send_chat(class_server.http, [{"role": "user", "content": "hi"}], model="no-such-model", max_tokens=2)
    with pytest.raises(ClassServerError, match="max tokens"):
        send_chat(class_server.http, [{"role": "user", "content": "hi"}], max_tokens=10_000)
    with pytest.raises(ClassServerError, match="not an http"):
        send_prompt("teacher-laptop:8000", "hi")


def test_an_unreachable_class_server_reads_as_a_clear_error():
    with pytest.raises(ClassServerError, match="cannot"):
        send_prompt("http://127.0.0.1:1", "hi", max_tokens=2)
