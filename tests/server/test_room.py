"""Sharing one server: quotas (429), keys, hang-ups that free blocks, and the KV events on the wire."""

from __future__ import annotations

import time

import pytest
import zmq
from openai import OpenAI

from engine.config import DEFAULT_MODEL
from engine.hashing import BlockHasher, external_block_hash
from engine.kv_events import END_SEQ, AllBlocksCleared, BlockStored, decode_batch, decode_seq, encode_seq
from tests.server.harness import STUDENT_KEYS, TEACHER_KEY, metric
from tests.server.http import error_message, open_stream, post
from tests.server.vllm_env import as_builtins, vllm_decode

pytestmark = pytest.mark.slow

LONG = {"model": DEFAULT_MODEL, "prompt": "Write a long story about a lighthouse keeper.", "max_tokens": 200,
        "temperature": 0, "ignore_eos": True}


class Subscriber:
    """A ZMQ SUB on the server's KV-event stream, as a router or the Live page would be."""

    def __init__(self, endpoint: str) -> None:
        self.socket = zmq.Context.instance().socket(zmq.SUB)
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        self.socket.connect(endpoint)
        time.sleep(0.5)  # PUB drops messages until the subscription has reached it

    def frames(self, until, timeout_s: float = 60.0) -> list[tuple[bytes, int, bytes]]:
        """Collect (topic, seq, payload) until ``until(events so far)`` holds."""
        got: list[tuple[bytes, int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.socket.poll(200):
                topic, seq, payload = self.socket.recv_multipart()
                got.append((topic, decode_seq(seq), payload))
                if until([e for _, _, p in got for e in decode_batch(p).events]):
                    return got
        raise AssertionError(f"condition not met; got {len(got)} frames")

    def close(self) -> None:
        self.socket.close(linger=0)


def wait_until(check, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_keys_are_required_and_only_the_teacher_resets(smol_server):
    code, _, raw = post(smol_server.url, "/v1/completions", {**LONG, "max_tokens": 1})
    assert code == 401 and "API key" in error_message(raw)
    code, _, raw = post(smol_server.url, "/v1/completions", {**LONG, "max_tokens": 1}, key="guess")
    assert code == 401
    code, _, raw = post(smol_server.url, "/reset_prefix_cache", b"", key=STUDENT_KEYS[0])
    assert code == 403 and "teacher" in error_message(raw)
    code, _, _ = post(smol_server.url, "/reset_prefix_cache", b"", key=TEACHER_KEY)
    assert code == 200


def test_a_client_over_its_quota_gets_429_while_others_are_served(smol_server):
    key = STUDENT_KEYS[2]
    streams = [open_stream(smol_server.url, "/v1/completions", LONG, key=key) for _ in range(3)]
    try:
        assert all(response.status == 200 for _, response in streams)
        code, headers, raw = post(smol_server.url, "/v1/completions", {**LONG, "max_tokens": 2}, key=key)
        assert code == 429 and int(headers["retry-after"]) >= 1
        assert "Too many requests" in error_message(raw)
        other = OpenAI(base_url=smol_server.url + "/v1", api_key=STUDENT_KEYS[0], max_retries=0)
        assert other.completions.create(model=DEFAULT_MODEL, prompt="Hello", max_tokens=2).usage.completion_tokens == 2
        assert metric(smol_server, "vllm:admission_rejections_total") >= 1
    finally:
        for connection, _ in streams:
            connection.close()


ABORTED = f'vllm:request_success_total{{model_name="{DEFAULT_MODEL}",engine="0",finished_reason="abort"}}'


def test_a_client_that_hangs_up_frees_its_blocks(smol_server):
    wait_until(lambda: metric(smol_server, "vllm:num_requests_running") == 0)
    aborted_before = metric(smol_server, ABORTED)
    subscriber = Subscriber(smol_server.zmq_endpoint)
    try:
        connection, response = open_stream(smol_server.url, "/v1/completions", LONG, key=STUDENT_KEYS[1])
        assert response.status == 200
        assert response.readline().startswith(b"data: ")  # the first token arrived: the request holds blocks
        assert metric(smol_server, "vllm:num_requests_running") >= 1
        assert metric(smol_server, "vllm:kv_cache_usage_perc") > 0
        connection.close()  # hang up mid-stream: long before its 200 tokens are done
        wait_until(lambda: metric(smol_server, ABORTED) == aborted_before + 1, timeout_s=5)
        assert metric(smol_server, "vllm:num_requests_running") == 0
        assert metric(smol_server, "vllm:kv_cache_usage_perc") == 0
        # vLLM refuses a reset while any request holds blocks; it succeeds, and the stream says so.
        code, _, _ = post(smol_server.url, "/reset_prefix_cache", b"", key=TEACHER_KEY)
        assert code == 200
        subscriber.frames(lambda events: any(isinstance(e, AllBlocksCleared) for e in events))
    finally:
        subscriber.close()


def test_kv_events_stream_and_replay(smol_server):
    subscriber = Subscriber(smol_server.zmq_endpoint)
    api = OpenAI(base_url=smol_server.url + "/v1", api_key=STUDENT_KEYS[0], max_retries=0)
    prompt = "Block hashes chain: each one covers every token before it. " * 4
    try:
        api.completions.create(model=DEFAULT_MODEL, prompt=prompt, max_tokens=2, temperature=0)
        frames = subscriber.frames(lambda events: any(isinstance(e, BlockStored) for e in events))
    finally:
        subscriber.close()
    topics = {topic for topic, _, _ in frames}
    assert topics == {b"kv"}
    seqs = [seq for _, seq, _ in frames]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    stored = next(e for _, _, p in frames for e in decode_batch(p).events if isinstance(e, BlockStored))
    # The hashes on the wire are the prompt's chained block hashes, as 64-bit ints.
    assert stored.block_size == 16 and stored.parent_block_hash is None
    assert len(stored.token_ids) == 16 * len(stored.block_hashes)
    expected = [external_block_hash(h) for h in BlockHasher("sha256").hash_request(stored.token_ids, 16)]
    assert stored.block_hashes == expected

    # Replay: ask the ROUTER for everything from the first frame we saw; same frames, then the end marker.
    replay = zmq.Context.instance().socket(zmq.DEALER)
    replay.connect(smol_server.zmq_replay)
    try:
        replay.send_multipart((b"", encode_seq(seqs[0])))  # a DEALER adds the empty delimiter REQ would
        replayed = []
        while True:
            assert replay.poll(10_000), "no replay answer"
            _, topic, seq, payload = replay.recv_multipart()
            if decode_seq(seq) == END_SEQ:
                break
            replayed.append((topic, decode_seq(seq), payload))
    finally:
        replay.close(linger=0)
    assert replayed[: len(frames)] == frames
    # vLLM's own decoder reads the live stream (skipped without the vLLM venv).
    payloads = [payload for _, _, payload in frames]
    assert vllm_decode(payloads) == as_builtins([decode_batch(p) for p in payloads])


def test_a_non_streaming_client_that_hangs_up_is_aborted_too(smol_server):
    import http.client
    import json

    wait_until(lambda: metric(smol_server, "vllm:num_requests_running") == 0)
    aborted_before = metric(smol_server, ABORTED)
    connection = http.client.HTTPConnection("127.0.0.1", smol_server.port, timeout=30)
    connection.request("POST", "/v1/completions", json.dumps(LONG).encode(),
                       {"Content-Type": "application/json", "Authorization": f"Bearer {STUDENT_KEYS[1]}"})
    wait_until(lambda: metric(smol_server, "vllm:num_requests_running") == 1)
    connection.close()  # gone before the answer
    wait_until(lambda: metric(smol_server, ABORTED) == aborted_before + 1, timeout_s=5)
    assert metric(smol_server, "vllm:kv_cache_usage_perc") == 0
    assert "Traceback" not in smol_server.log()
