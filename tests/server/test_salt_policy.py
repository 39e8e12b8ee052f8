"""A student's ``cache_salt`` belongs to the student's key (issue 21, item 5).

On vLLM the salt is whatever the request body says, so a student who sends a classmate's salt
shares the classmate's cache and can time it. ``prefixlab serve`` binds the salt to the key by
default. Tested with the real ``openai`` client against real servers (a tiny random llama, token-id
prompts, so they start in seconds): under ``free`` the leak is there (the test can fail), under
``bound`` (the default) a second key sending the first key's salt hits nothing, so the engine
computes its whole prompt, exactly like a prompt nobody ever sent: no TTFT side channel to read.
"""

from __future__ import annotations

import random
import statistics
import time

import pytest
from openai import OpenAI

from engine.errors import ConfigError
from engine.server.salt import SaltBinder
from tests.model.tiny_models import tiny_model_dirs  # noqa: F401  (a fixture)
from tests.server.harness import start_server

ALICE, MALLORY, TEACHER = "alice-key", "mallory-key", "teacher-key"
BLOCK = 4


# -- the policy on its own -----------------------------------------------------------------------------
def test_a_bound_salt_is_the_keys_own() -> None:
    binder = SaltBinder("bound", secret=b"s")
    assert binder.salt_for("key:alice", False, "x") != binder.salt_for("key:mallory", False, "x")
    assert binder.salt_for("key:alice", False, "x") == binder.salt_for("key:alice", False, "x")
    assert binder.salt_for("key:alice", False, None) is None  # unsalted requests still share, as in vLLM
    assert binder.salt_for("key:teacher", True, "x") == "x"  # the teacher may show vLLM's behaviour
    assert "alice" not in binder.salt_for("key:alice", False, "x")  # the tag never reveals a key
    # Nobody can pick a salt that lands on another key's: every student salt starts with its own tag.
    forged = binder.salt_for("key:mallory", False, binder.salt_for("key:alice", False, "x"))
    assert forged != binder.salt_for("key:alice", False, "x")


def test_isolated_salts_every_student_request_and_free_is_vllms() -> None:
    isolated = SaltBinder("isolated", secret=b"s")
    assert isolated.salt_for("key:alice", False, None) != isolated.salt_for("key:mallory", False, None)
    assert SaltBinder("free").salt_for("key:mallory", False, "alice-salt") == "alice-salt"
    with pytest.raises(ConfigError, match="bound"):
        SaltBinder("open")


# -- real servers, the real openai client --------------------------------------------------------------
def _server(tmp_path_factory, model_dir: str, policy: str | None):
    args = ["--model", model_dir, "--served-model-name", "tiny", "--num-blocks", "64", "--block-size", str(BLOCK),
            "--max-prompt-tokens", "64", "--max-tokens-limit", "8", "--request-timeout", "30",
            "--api-key", ALICE, "--api-key", MALLORY, "--teacher-key", TEACHER]
    if policy:
        args += ["--cache-salt-policy", policy]
    return start_server(*args, log_dir=tmp_path_factory.mktemp(f"serve-salt-{policy}"), kv_events=False)


@pytest.fixture(scope="module", params=[None, "free"], ids=["default-bound", "free"])
def salted_server(request, tmp_path_factory, tiny_model_dirs):  # noqa: F811
    server = _server(tmp_path_factory, tiny_model_dirs["llama"], request.param)
    yield request.param or "bound", server
    server.stop()


def _prompt(seed: int) -> list[int]:
    """40 token ids the tiny model knows (its vocabulary has 128), different for every seed."""
    return random.Random(seed).sample(range(1, 128), 40)


def _send(server, key: str, prompt: list[int], salt: str | None) -> tuple[int, float]:
    """(cached_tokens, seconds to the first streamed token) for one completion."""
    api = OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=60)
    extra = {"cache_salt": salt} if salt else {}
    started = time.perf_counter()
    stream = api.completions.create(model="tiny", prompt=prompt, max_tokens=2, temperature=0, stream=True,
                                    stream_options={"include_usage": True}, extra_body=extra)
    ttft, cached = None, None
    for chunk in stream:
        if ttft is None and chunk.choices and chunk.choices[0].text is not None:
            ttft = time.perf_counter() - started
        if chunk.usage is not None:
            details = chunk.usage.prompt_tokens_details
            cached = details.cached_tokens if details else 0
    assert cached is not None and ttft is not None
    return cached, ttft


def test_a_second_key_sending_the_first_keys_salt_gets_no_hit(salted_server) -> None:
    policy, server = salted_server
    secret = _prompt(0)  # Alice's private prompt: 40 token ids, 10 blocks
    assert _send(server, ALICE, secret, "alice-salt")[0] == 0
    own, _ = _send(server, ALICE, secret, "alice-salt")
    assert own == len(secret) - BLOCK  # Alice still hits her own blocks (the last block is recomputed)
    stolen, _ = _send(server, MALLORY, secret, "alice-salt")
    if policy == "free":
        assert stolen == own, "vLLM's rule: the salt as sent, so Mallory shares Alice's cache"
    else:
        assert stolen == 0, f"{policy}: another key's salt must not reach Alice's blocks"


def test_the_stolen_salt_times_like_a_prompt_nobody_sent(salted_server) -> None:
    """No side channel: Mallory's requests with Alice's salt do the same work as cold ones.

    The engine computes every prompt token in both cases (cached_tokens 0), which is what TTFT
    reads. Timings on a shared CPU are noisy, so they are reported, not asserted.
    """
    policy, server = salted_server
    if policy == "free":
        pytest.skip("free is vLLM's rule: the leak is the point")
    probes, colds = [], []
    for round_ in range(5):
        secret = _prompt(1 + 2 * round_)
        _send(server, ALICE, secret, "alice-salt")
        cached, ttft = _send(server, MALLORY, secret, "alice-salt")
        cold_cached, cold_ttft = _send(server, MALLORY, _prompt(2 + 2 * round_), "alice-salt")
        assert cached == 0 and cold_cached == 0
        probes.append(ttft)
        colds.append(cold_ttft)
    print(f"\n{policy}: TTFT median with Alice's salt {statistics.median(probes) * 1000:.1f} ms, "
          f"cold prompt {statistics.median(colds) * 1000:.1f} ms")
