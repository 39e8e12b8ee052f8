"""The Playground's session without Streamlit, on the simulator: send, step, queue, reset, clear."""

from __future__ import annotations

import pytest

from engine import EngineConfig, LLMEngine
from teaching import limits
from teaching.pages.playground import CHAT, PRESETS, TEXT
from teaching.pages.playground_session import EngineSettings, PlaygroundSession

SETTINGS: EngineSettings = (True, 8, 4, "0.33", "sha256")


def build(config: EngineConfig, kv_mib: int) -> LLMEngine:
    config.backend, config.num_blocks = "simulator", 200
    return LLMEngine(config)


def finish_all(pg: PlaygroundSession, engine: LLMEngine) -> None:
    while pg.pending:
        while pg.step(engine):
            pass
        pg.send_queued(engine)


@pytest.fixture
def pg() -> PlaygroundSession:
    session = PlaygroundSession(kv_mib=8)
    session.load_preset("divergence")
    return session


def test_a_new_session_holds_the_default_presets_first_input() -> None:
    pg = PlaygroundSession(kv_mib=8)
    assert (pg.preset, pg.mode, pg.next_input) == ("shared-system", CHAT, 0)
    assert pg.message == PRESETS["shared-system"].inputs[0] and pg.system == PRESETS["shared-system"].system


def test_send_then_step_until_done_moves_the_preset_on_and_the_second_prompt_hits(pg: PlaygroundSession) -> None:
    engine = pg.engine_for(SETTINGS, build)
    first, second = PRESETS["divergence"].inputs
    assert pg.mode == TEXT and pg.text == first
    assert pg.send(pg.current_text, engine) and pg.error is None
    assert pg.text == second and pg.next_input == 1  # the box holds the preset's next input
    steps = 0
    while pg.step(engine):
        steps += 1
    assert steps >= 1 and not pg.pending and [r.user for r in pg.history] == [first]
    assert pg.chat == []  # raw text keeps no conversation
    assert pg.send(pg.current_text, engine)
    finish_all(pg, engine)
    newest = pg.history[0]
    assert newest.user == second and engine.output_of(newest.id).num_cached_tokens >= 4  # the shared start hit


def test_one_request_at_a_time_and_refusals_keep_the_text(pg: PlaygroundSession) -> None:
    engine = pg.engine_for(SETTINGS, build)
    assert pg.send(pg.current_text, engine)
    waiting = pg.current_text
    assert not pg.send(waiting, engine) and "Wait for the current answer" in str(pg.error)
    assert pg.current_text == waiting and len(pg.pending) == 1
    finish_all(pg, engine)
    too_long = "x" * (limits.MAX_PROMPT_CHARS + 1)
    pg.text = too_long
    assert not pg.send(too_long, engine) and "20,000" in str(pg.error) and pg.text == too_long
    pg.text = "   "
    assert not pg.send(pg.text, engine) and "empty" in str(pg.error)


def test_send_rest_queues_the_later_inputs_and_sends_them_one_by_one() -> None:
    pg = PlaygroundSession(kv_mib=8)
    pg.load_preset("document-qa")
    engine = pg.engine_for(SETTINGS, build)
    inputs = PRESETS["document-qa"].inputs
    assert pg.can_send_rest and pg.send_rest(engine)
    assert pg.queue == list(inputs[1:])
    finish_all(pg, engine)
    assert [r.user for r in pg.history] == list(inputs[::-1]) and pg.queue == []
    assert not pg.can_send_rest


def test_a_refusal_empties_the_queue() -> None:
    pg = PlaygroundSession(kv_mib=8)
    pg.load_preset("document-qa")
    engine = pg.engine_for(SETTINGS, build)
    pg.send_rest(engine)
    while pg.step(engine):
        pass
    pg.error = "something went wrong"
    assert not pg.send_queued(engine) and pg.queue == [] and len(pg.history) == 1


def test_the_engine_is_rebuilt_when_its_settings_change_and_after_clear(pg: PlaygroundSession) -> None:
    engine = pg.engine_for(SETTINGS, build)
    assert pg.engine_for(SETTINGS, build) is engine
    pg.send(pg.current_text, engine)
    finish_all(pg, engine)
    off = pg.engine_for((False, *SETTINGS[1:]), build)
    assert off is not engine and off.kv_cache_manager.enable_caching is False and pg.history == []
    pg.notice, pg.error = "old", "old"
    pg.clear()
    assert (pg.engine, pg.error, pg.notice) == (None, None, None)
    assert pg.engine_for((False, *SETTINGS[1:]), build) is not off


def test_reset_cache_says_what_happened(pg: PlaygroundSession) -> None:
    engine = pg.engine_for(SETTINGS, build)
    pg.send(pg.current_text, engine)
    assert pg.step(engine)  # scheduled: the request holds blocks now
    pg.reset_cache(engine)
    assert "refused" in str(pg.notice)  # the request still holds its blocks
    finish_all(pg, engine)
    pg.reset_cache(engine)
    assert "Prefix cache cleared" in str(pg.notice)


def test_chat_turns_are_kept_only_when_continuing() -> None:
    pg = PlaygroundSession(kv_mib=8)
    pg.load_preset("multi-turn")
    assert pg.continue_chat and pg.mode == CHAT
    engine = pg.engine_for(SETTINGS, build)
    assert not pg.send(pg.current_text, engine)  # the simulator has no chat template: the engine says so
    assert "chat template" in str(pg.error) and pg.message == PRESETS["multi-turn"].inputs[0]


def test_only_the_shown_requests_pictures_are_kept() -> None:
    pg = PlaygroundSession(kv_mib=8)
    pg.drawn = {"r1": "figure 1", "r2": "figure 2", "r3": "figure 3"}
    pg.keep_drawn(["r3", "r2", "r9"])
    assert pg.drawn == {"r2": "figure 2", "r3": "figure 3"}
