"""The real ``openai`` client against a real ``prefixlab serve`` running the real default model."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from openai import AsyncOpenAI, OpenAI

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.config import DEFAULT_MODEL
from tests.server.harness import STUDENT_KEYS

pytestmark = pytest.mark.slow

SYSTEM = ("You are PrefixLab's tutor. You explain how serving engines reuse the key-value cache across "
          "requests, block by block, in plain words. Keep answers short and concrete.")


def client(server, key: str = STUDENT_KEYS[0]) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=120)


def chat(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_models_lists_the_served_model(smol_server):
    assert [m.id for m in client(smol_server).models.list().data] == [DEFAULT_MODEL]


def test_second_request_sharing_a_prompt_reports_cached_tokens(smol_server):
    api = client(smol_server)
    first = api.chat.completions.create(model=DEFAULT_MODEL, messages=chat("What is a block?"), max_tokens=4,
                                        temperature=0)
    second = api.chat.completions.create(model=DEFAULT_MODEL, messages=chat("What is a hash?"), max_tokens=4,
                                         temperature=0)
    assert first.choices[0].message.content
    assert second.usage.prompt_tokens_details.cached_tokens > 0
    # Whole 16-token blocks of the shared system prompt, never the whole prompt.
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached % 16 == 0 and cached < second.usage.prompt_tokens


def test_cache_salt_keeps_students_apart(smol_server):
    api = client(smol_server)
    messages = chat("Who may read my cache?")
    api.chat.completions.create(model=DEFAULT_MODEL, messages=messages, max_tokens=2, temperature=0,
                                extra_body={"cache_salt": "student-a"})
    other = api.chat.completions.create(model=DEFAULT_MODEL, messages=messages, max_tokens=2, temperature=0,
                                        extra_body={"cache_salt": "student-b"})
    same = api.chat.completions.create(model=DEFAULT_MODEL, messages=messages, max_tokens=2, temperature=0,
                                       extra_body={"cache_salt": "student-a"})
    assert other.usage.prompt_tokens_details.cached_tokens == 0
    assert same.usage.prompt_tokens_details.cached_tokens > 0


@pytest.fixture(scope="module")
def local_engine():
    return LLMEngine(EngineConfig(model=DEFAULT_MODEL))


def test_greedy_output_equals_the_engines_own_generate(smol_server, local_engine):
    api = client(smol_server)
    prompt = "The three primary colors are"
    expected = local_engine.generate([prompt], SamplingParams(max_tokens=12, temperature=0))[0]
    got = api.completions.create(model=DEFAULT_MODEL, prompt=prompt, max_tokens=12, temperature=0)
    assert got.choices[0].text == expected.text
    assert got.usage.completion_tokens == len(expected.token_ids)

    messages = chat("Name one prime number.")
    expected_chat = local_engine.generate([messages], SamplingParams(max_tokens=12, temperature=0))[0]
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in api.chat.completions.create(model=DEFAULT_MODEL, messages=messages, max_tokens=12,
                                                 temperature=0, stream=True)
        if chunk.choices
    )
    assert streamed == expected_chat.text


def test_sync_streaming_with_usage_and_stop(smol_server):
    api = client(smol_server)
    chunks = list(api.completions.create(model=DEFAULT_MODEL, prompt="Count: 1, 2, 3, 4,", max_tokens=20,
                                         temperature=0, stream=True, stream_options={"include_usage": True},
                                         stop=[" 7"]))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["stop"]
    assert " 7" not in text and "5" in text
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_async_client_streaming_and_not(smol_server):
    async def run() -> tuple[str, str]:
        api = AsyncOpenAI(base_url=smol_server.url + "/v1", api_key=STUDENT_KEYS[1], max_retries=0, timeout=120)
        whole = await api.chat.completions.create(model=DEFAULT_MODEL, messages=chat("Define a token."),
                                                  max_tokens=10, temperature=0)
        stream = await api.chat.completions.create(model=DEFAULT_MODEL, messages=chat("Define a token."),
                                                   max_tokens=10, temperature=0, stream=True)
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        await api.close()
        return whole.choices[0].message.content or "", "".join(parts)

    # In a thread of its own: the browser tests' Playwright keeps an event loop running on this one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        whole, streamed = pool.submit(asyncio.run, run()).result()
    assert whole and whole == streamed


def test_seeded_sampling_repeats(smol_server):
    api = client(smol_server)
    texts = [api.completions.create(model=DEFAULT_MODEL, prompt="Once upon a time", max_tokens=8, temperature=0.9,
                                    top_p=0.9, seed=7).choices[0].text for _ in range(2)]
    assert texts[0] == texts[1]
