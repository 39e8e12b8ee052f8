"""vLLM's token endpoints on a real ``prefixlab serve``: ``/tokenize``, ``/detokenize``, the render pair
(what ``vllm-router --policy kv_aware`` asks for), and ``created_cache_tokens`` in usage."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from openai import OpenAI

from engine.config import DEFAULT_MODEL
from tests.server import http
from tests.server.harness import STUDENT_KEYS

pytestmark = pytest.mark.slow

BLOCK = 16
SYSTEM = ("You are PrefixLab's router tutor. A router that knows which replica caches which blocks sends "
          "a request to the replica holding its longest prefix, and so saves that prefill.")


@dataclass
class Answer:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def post(server, path: str, body: dict, key: str = STUDENT_KEYS[1]) -> Answer:
    status, _, raw = http.post(server.url, path, body, key=key)
    return Answer(status, raw.decode())


def messages(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_tokenize_detokenize_round_trip(smol_server):
    answer = post(smol_server, "/tokenize", {"prompt": "Blocks of sixteen tokens", "return_token_strs": True})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"count", "max_model_len", "tokens", "token_strs"}
    assert body["count"] == len(body["tokens"]) == len(body["token_strs"]) > 0
    assert body["max_model_len"] > 0
    text = post(smol_server, "/detokenize", {"tokens": body["tokens"]}).json()
    assert text == {"prompt": "Blocks of sixteen tokens"}


def test_render_gives_the_ids_the_engine_runs(smol_server):
    """The ids a router hashes must be the ids the engine caches: same count as the real request's usage."""
    api = OpenAI(base_url=smol_server.url + "/v1", api_key=STUDENT_KEYS[1], max_retries=0, timeout=120)
    chat = messages("Which replica gets my request?")
    rendered = post(smol_server, "/v1/chat/completions/render", {"model": DEFAULT_MODEL, "messages": chat,
                                                                 "max_tokens": 3})
    assert rendered.status_code == 200, rendered.text
    one = rendered.json()
    assert isinstance(one, dict) and one["request_id"].startswith("chatcmpl-")
    assert one["sampling_params"]["max_tokens"] == 3 and one["model"] == DEFAULT_MODEL
    tokenized = post(smol_server, "/tokenize", {"messages": chat}).json()
    assert one["token_ids"] == tokenized["tokens"]
    real = api.chat.completions.create(model=DEFAULT_MODEL, messages=chat, max_tokens=1, temperature=0)
    assert real.usage.prompt_tokens == len(one["token_ids"])

    prompt = SYSTEM + " Completions too."
    listed = post(smol_server, "/v1/completions/render", {"model": DEFAULT_MODEL, "prompt": prompt}).json()
    assert isinstance(listed, list) and len(listed) == 1
    assert listed[0]["token_ids"] == post(smol_server, "/tokenize", {"prompt": prompt}).json()["tokens"]
    assert listed[0]["sampling_params"]["max_tokens"] == 16  # OpenAI's completions default
    real_completion = api.completions.create(model=DEFAULT_MODEL, prompt=prompt, max_tokens=1, temperature=0)
    assert real_completion.usage.prompt_tokens == len(listed[0]["token_ids"])


def test_render_refuses_what_generation_refuses(smol_server):
    assert post(smol_server, "/v1/completions/render", {"model": "other", "prompt": "x"}).status_code == 404
    assert post(smol_server, "/v1/chat/completions/render", {"messages": []}).status_code == 400
    assert post(smol_server, "/v1/completions/render", {"prompt": "x", "n": 2}).status_code == 400
    assert post(smol_server, "/tokenize", {"prompt": "x"}, key="wrong").status_code == 401
    assert post(smol_server, "/detokenize", {"tokens": [10**9]}).status_code == 400


def test_created_cache_tokens_as_vllm_counts_them(smol_server):
    """vLLM: tokens of the prompt's full blocks cached once prefill is done, minus the tokens found cached."""
    api = OpenAI(base_url=smol_server.url + "/v1", api_key=STUDENT_KEYS[2], max_retries=0, timeout=120)
    salt = {"cache_salt": "created-cache-test"}
    chat = messages("How many tokens did I write to the cache?")
    # max_tokens=1: the request ends on its first token (and frees its blocks) in the step that counts them.
    first = api.chat.completions.create(model=DEFAULT_MODEL, messages=chat, max_tokens=1, temperature=0, extra_body=salt)
    details = first.usage.prompt_tokens_details
    assert details.cached_tokens == 0
    assert details.created_cache_tokens == first.usage.prompt_tokens // BLOCK * BLOCK
    again = api.chat.completions.create(model=DEFAULT_MODEL, messages=chat, max_tokens=2, temperature=0, extra_body=salt)
    details = again.usage.prompt_tokens_details
    assert details.cached_tokens > 0
    assert details.cached_tokens + details.created_cache_tokens == again.usage.prompt_tokens // BLOCK * BLOCK


def test_token_ids_render_and_a_model_without_tokenizer(tiny_server):
    """A tiny random model has no tokenizer: text is refused with a clear 400, token ids render as they are."""
    status, _, raw = http.post(tiny_server.url, "/tokenize", {"prompt": "text"})
    assert status == 400 and b"no tokenizer" in raw
    status, _, raw = http.post(tiny_server.url, "/v1/completions/render", {"model": "tiny", "prompt": [5, 6, 7, 8]})
    assert status == 200, raw
    assert json.loads(raw)[0]["token_ids"] == [5, 6, 7, 8]
    status, _, raw = http.post(tiny_server.url, "/v1/completions/render", {"prompt": list(range(100))})
    assert status == 400 and b"at most 64" in raw  # the server's prompt cap, as for a real request
