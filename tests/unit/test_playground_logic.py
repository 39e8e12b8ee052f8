"""The Playground's logic on the simulator: prompts, block ids from events, one request as blocks."""

from __future__ import annotations

import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.errors import InvalidRequestError
from teaching.pages.playground import CHAT, PRESETS, TEXT, build_prompt, request_block_ids, request_view, token_piece
from viz.tokens import token_blocks_figure


@pytest.fixture
def engine() -> LLMEngine:
    return LLMEngine(EngineConfig(backend="simulator", num_blocks=20, block_size=4))


def run(engine: LLMEngine, prompt: str, max_tokens: int = 3) -> str:
    request_id = engine.add_request(prompt, SamplingParams(max_tokens=max_tokens))
    while not engine.get_request(request_id).is_finished:
        engine.step()
    return request_id


def test_build_prompt() -> None:
    assert build_prompt(TEXT, "hello", "ignored") == "hello"
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert build_prompt(CHAT, "c", "sys", history) == [
        {"role": "system", "content": "sys"}, *history, {"role": "user", "content": "c"}]
    assert build_prompt(CHAT, "c", "  ") == [{"role": "user", "content": "c"}]
    assert build_prompt(CHAT, "  ", "sys") == ""  # the engine refuses it with its own message


def test_presets_are_complete() -> None:
    assert {"shared-system", "multi-turn", "document-qa", "divergence"} <= set(PRESETS)
    assert all(p.inputs and p.mode in (CHAT, TEXT) and p.note for p in PRESETS.values())
    a, b = PRESETS["divergence"].inputs
    assert a[:100] == b[:100] and a != b


def test_second_request_hits_and_shows_its_physical_blocks(engine: LLMEngine) -> None:
    first = run(engine, "a b c d e f g h i j")
    second = run(engine, "a b c d e f g h x y")
    view = request_view(engine, second)
    assert view.states == ["hit", "hit", "computed", "partial"]  # 10 prompt + 3 output = 13 tokens
    assert view.physical_ids[:2] == request_block_ids(engine.kv_cache_manager.events.events, first)[:2]
    assert view.physical_ids[2] not in request_block_ids(engine.kv_cache_manager.events.events, first)
    assert view.short_hashes[0] == view.full_hashes[0][:8] and view.short_hashes[3] is None
    assert view.metrics["cached_tokens"] == 8 and view.metrics["computed_prefill_tokens"] == 2
    assert view.token_text[:3] == ["a", "b", "c"] and view.num_hit_blocks == 2


def test_block_ids_survive_the_request_finishing(engine: LLMEngine) -> None:
    request_id = run(engine, "p q r s t u")
    assert engine.get_request(request_id).is_finished
    assert request_block_ids(engine.kv_cache_manager.events.events, request_id) == [1, 2]


def test_bad_prompt_raises_the_engines_message(engine: LLMEngine) -> None:
    with pytest.raises(InvalidRequestError, match="empty"):
        engine.add_request(build_prompt(TEXT, "   "))


def test_token_piece_makes_whitespace_visible() -> None:
    class Hf:
        def decode(self, ids, skip_special_tokens=True):
            return {1: "\n", 2: " ", 3: " cat"}[ids[0]]

    class Tok:
        hf_tokenizer = Hf()

    assert [token_piece(Tok(), i) for i in (1, 2, 3)] == ["↵", "␣", "cat"]


def test_token_figure_shows_physical_ids_only_when_given() -> None:
    args = (["a"] * 9, 4, ["hit", "computed", "partial"], ["aaaa1111", "bbbb2222", None])
    with_ids = token_blocks_figure(*args, physical_ids=[7, 3, None])
    assert with_ids.data[1].text[0].startswith("<b>block 0</b> → #7 · aaaa1111")
    assert "→" not in with_ids.data[1].text[2]
    assert "physical KV block #3" in with_ids.data[1].hovertext[1]
    plain = token_blocks_figure(*args)
    assert plain.data[1].text[0] == "<b>block 0</b> · aaaa1111"
    assert token_blocks_figure(["abcdefghij"], 4, ["partial"], max_token_chars=4).data[0].text[0] == "abc…"


def test_engine_measures_ttft_from_scheduling_and_prefill_apart() -> None:
    """Time before the engine schedules a request (a page redraw) must not count in its TTFT."""
    import time

    from engine.config import EngineConfig
    from engine.llm_engine import LLMEngine
    from engine.request import SamplingParams

    engine = LLMEngine(EngineConfig(backend="simulator", block_size=4))
    engine.add_request("a b c d e f g h i", SamplingParams(max_tokens=2), request_id="slow-page")
    time.sleep(0.2)  # the page redraws before the first step
    while engine.has_unfinished_requests():
        engine.step()
    metrics = engine.metrics["slow-page"]
    assert metrics.ttft is not None and metrics.ttft >= 0.2  # from arrival: the wait included
    assert metrics.queue_time is not None and metrics.queue_time >= 0.2
    assert metrics.scheduled_ttft is not None and metrics.scheduled_ttft < 0.1  # the engine's own reading
    assert 0 < metrics.prefill_time <= metrics.scheduled_ttft
    assert metrics.as_dict()["scheduled_ttft_s"] == metrics.scheduled_ttft


def test_metrics_line_shows_the_engines_ttft_not_the_time_since_send() -> None:
    from teaching.pages.playground import metrics_text

    line = metrics_text({"ttft_s": 1.909, "queue_s": 1.85, "scheduled_ttft_s": 0.059, "prefill_s": 0.052,
                         "prompt_tokens": 153, "cached_tokens": 128, "computed_prefill_tokens": 25, "output_tokens": 3,
                         "tokens_per_s": 21.44})
    assert "**TTFT 59 ms**" in line and "prefill forward pass 52 ms" in line
    assert "queued 1850 ms" in line and "decode 21.4 tokens/s" in line  # where the rest of the time went
    assert "1909" not in line
