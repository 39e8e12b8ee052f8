"""Bad requests get a clear 4xx with an OpenAI-style error body, and never kill the server."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.harness import metric, start_server
from tests.server.http import error_message, post

PROMPT = list(range(1, 21))  # token ids: the tiny model has no tokenizer


def completion(**fields) -> dict:
    return {"model": "tiny", "prompt": PROMPT, "max_tokens": 4, "temperature": 0, **fields}


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b'{"model": "tiny", "prompt": [1, 2', 400, "not valid JSON"),
        (b"[1, 2, 3]", 400, "JSON object"),
        (completion(model="gpt-9"), 404, "does not exist"),
        (completion(prompt=list(range(1, 70))), 400, "at most 64"),
        (completion(max_tokens=-3), 400, "max_tokens"),
        (completion(max_tokens=49), 400, "limit of 48"),
        (completion(n=2), 400, "n must be 1"),
        (completion(logprobs=2), 400, "logprobs"),
        (completion(prompt=["a", "b"]), 400, "one prompt per request"),
        (completion(prompt=[]), 400, "empty"),
        (completion(prompt=[10_000]), 400, "vocabulary"),
        (completion(temperature=-1), 400, "temperature"),
        (completion(top_p=0), 400, "top_p"),
        (completion(seed=-1), 400, "seed"),
        (completion(max_tokens="lots"), 400, "max_tokens"),
        ({"model": "tiny"}, 400, "prompt"),
    ],
)
def test_bad_completion_requests(tiny_server, body, status, words):
    code, _, raw = post(tiny_server.url, "/v1/completions", body)
    assert code == status, raw
    assert words in error_message(raw)


def test_bad_chat_requests(tiny_server):
    messages = [{"role": "user", "content": "hi"}]
    for fields, words in [({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
                          ({"logprobs": True}, "logprobs"), ({"messages": []}, "messages"),
                          ({"messages": [{"role": "wizard", "content": "x"}]}, "role")]:
        code, _, raw = post(tiny_server.url, "/v1/chat/completions", {"model": "tiny", "messages": messages, **fields})
        assert code == 400 and words in error_message(raw), raw
    # A model without a chat template: a clear 400, not a crash.
    code, _, raw = post(tiny_server.url, "/v1/chat/completions", {"model": "tiny", "messages": messages})
    assert code == 400 and "chat template" in error_message(raw)


def test_oversize_body_is_refused_unparsed(tiny_server):
    code, _, raw = post(tiny_server.url, "/v1/completions", b"{" + b" " * (2 << 20) + b"}")
    assert code == 413 and "limit" in error_message(raw)


def test_unknown_route_is_a_json_404(tiny_server):
    code, _, raw = post(tiny_server.url, "/v1/embeddings", completion())
    assert code == 404 and error_message(raw)


def test_curl_works(tiny_server):
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "60", tiny_server.url + "/v1/completions", "-H", "Content-Type: application/json",
         "-d", json.dumps(completion(max_tokens=5))],
        capture_output=True, text=True, timeout=90,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["usage"]["completion_tokens"] == 5 and answer["choices"][0]["finish_reason"] == "length"
    streamed = subprocess.run(
        ["curl", "-sSN", "--max-time", "60", tiny_server.url + "/v1/completions", "-H",
         "Content-Type: application/json", "-d", json.dumps(completion(max_tokens=5, stream=True))],
        capture_output=True, text=True, timeout=90,
    )
    events = [line for line in streamed.stdout.splitlines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and len(events) >= 2


FIELDS = ["model", "prompt", "messages", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream",
          "n", "cache_salt", "logprobs", "stream_options", "max_completion_tokens", "echo", "user"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
small_ints = st.integers(-5, 60)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["tiny", "other"]) | json_values,
        "prompt": st.lists(st.integers(-3, 200), max_size=70) | json_values,
        "messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "x"]),
                                                    "content": st.text(max_size=30) | json_values}), max_size=3),
        "max_tokens": small_ints | json_values,
        "temperature": st.floats(-1, 3) | json_values,
        "top_p": st.floats(-0.5, 1.5) | json_values,
        "top_k": small_ints,
        "seed": st.integers(-10, 2**64) | json_values,
        "stop": st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=10) | json_values,
        "stream": st.booleans() | json_values,
        "n": small_ints,
        "cache_salt": st.text(max_size=5) | json_values,
        "stream_options": json_values,
    },
) | st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies, chat=st.booleans())
def test_fuzzed_bodies_never_break_the_server(tiny_server, body, chat):
    path = "/v1/chat/completions" if chat else "/v1/completions"
    code, _, raw = post(tiny_server.url, path, body, timeout=60)
    assert code < 500, raw[:500]
    if code >= 400:
        error_message(raw)
    assert tiny_server.alive()


def test_server_still_healthy_after_the_fuzz(tiny_server):
    code, _, raw = post(tiny_server.url, "/v1/completions", completion())
    assert code == 200, raw
    assert "Traceback" not in tiny_server.log()  # no handler or engine-loop failure was even logged



@pytest.fixture(scope="module")
def impatient_server(tmp_path_factory, tiny_model_dirs):
    server = start_server("--model", tiny_model_dirs["llama"], "--served-model-name", "tiny", "--block-size", "4",
                          "--num-blocks", "64", "--request-timeout", "0.02", kv_events=False,
                          log_dir=tmp_path_factory.mktemp("serve-impatient"))
    yield server
    server.stop()


def test_a_request_past_the_timeout_is_stopped_and_freed(impatient_server):
    code, _, raw = post(impatient_server.url, "/v1/completions", completion(max_tokens=200, ignore_eos=True))
    assert code == 408 and "limit" in error_message(raw)
    for _ in range(50):  # the abort reaches the engine thread a moment later
        if metric(impatient_server, "vllm:kv_cache_usage_perc") == 0:
            break
        time.sleep(0.1)
    assert metric(impatient_server, "vllm:kv_cache_usage_perc") == 0
    assert metric(impatient_server, "vllm:num_requests_running") == 0
