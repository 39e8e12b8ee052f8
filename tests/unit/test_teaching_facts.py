"""Facts the lessons and built-in scenarios state, checked against the engine that plays them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.events import RequestPreempted
from teaching.lessons.answers import engine_state_after
from teaching.lessons.loader import answer_question, load_lessons
from teaching.scenarios.library import BUILTIN_SCENARIOS
from teaching.scenarios.scenario import AddRequest, Scenario, parse_scenario, run_scenario

LESSONS = Path(__file__).resolve().parents[2] / "lessons"
TOKEN_CLAIM = re.compile(r"(\d+)-token system prompt")


def lessons():  # type: ignore[no-untyped-def]
    good, errors = load_lessons(LESSONS)
    assert not errors
    return {lesson.slug: lesson for lesson in good}


def shared_prefix_tokens(scenario: Scenario) -> int:
    """How many leading prompt tokens every request of the scenario has in common."""
    prompts = [a.prompt.split() if isinstance(a.prompt, str) else a.prompt
               for a in scenario.actions if isinstance(a, AddRequest)]
    n = 0
    while all(len(p) > n and p[n] == prompts[0][n] for p in prompts):
        n += 1
    return n


def claims(text: str) -> list[int]:
    return [int(n) for n in TOKEN_CLAIM.findall(text)]


@pytest.mark.parametrize("key", list(BUILTIN_SCENARIOS))
def test_built_in_scenarios_count_their_system_prompt_right(key: str) -> None:
    scenario = parse_scenario(BUILTIN_SCENARIOS[key])
    for claim in claims(BUILTIN_SCENARIOS[key]):
        assert claim == shared_prefix_tokens(scenario)


def test_lesson_3_counts_its_system_prompt_right() -> None:
    lesson = lessons()["03-shared-system-prompt"]
    text = lesson.path.read_text()
    assert claims(text), "the lesson names the prompt's length"
    for claim in claims(text):
        assert claim == shared_prefix_tokens(lesson.scenario) == 9


@pytest.mark.parametrize("key", list(BUILTIN_SCENARIOS))
def test_built_in_scenarios_show_real_words_not_made_up_tokens(key: str) -> None:
    run = run_scenario(parse_scenario(BUILTIN_SCENARIOS[key]), "vllm")
    for request_id in run.scenario.request_ids:
        for token in run.engine.get_request(request_id).all_token_ids:
            assert not re.fullmatch(r"t\d+", run.token_text(token)), f"{key}: {request_id} shows {run.token_text(token)}"


def test_lessons_show_real_words_not_made_up_tokens() -> None:
    for slug, lesson in lessons().items():
        run = run_scenario(lesson.scenario, lesson.policies[0])
        for request_id in run.scenario.request_ids:
            for token in run.engine.get_request(request_id).all_token_ids:
                assert not re.fullmatch(r"t\d+", run.token_text(token)), f"{slug}: {request_id} shows {run.token_text(token)}"


def test_lesson_9_says_a_preempted_request_keeps_its_tokens_and_the_engine_agrees() -> None:
    lesson = lessons()["09-preemption"]
    assert "produces the same tokens again" not in lesson.body
    assert "keeps the tokens it" in lesson.body
    state = engine_state_after(lesson.scenario, lesson.labels["preempt"])
    assert any(isinstance(e, RequestPreempted) and e.request_id == "r1" for e in state.events)
    r1 = state.run.engine.get_request("r1")
    assert r1.num_output_tokens > 0 and r1.num_computed_tokens == 0  # tokens kept, K/V to recompute


def test_lesson_9_does_not_mark_waiting_wrong_for_a_request_in_the_waiting_queue() -> None:
    lesson = lessons()["09-preemption"]
    question = lesson.questions[0]
    answer = answer_question(lesson, question)
    assert answer.text == "preempted"
    assert "waiting" not in answer.options


def test_hit_rate_options_do_not_give_the_answer_away() -> None:
    """Lesson 3 Q4: the engine's 45.3% must not be the only option that is not a round number."""
    lesson = lessons()["03-shared-system-prompt"]
    question = next(q for q in lesson.questions if q.answer.kind == "percent")
    answer = answer_question(lesson, question)
    round_ones = [o for o in answer.options if float(o.rstrip("%")) % 25 == 0]
    assert len(answer.options) == 4
    assert len(round_ones) < len(answer.options) - 1 or answer.text in round_ones
