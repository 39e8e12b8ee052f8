"""Lessons: the format, the loader's errors, and answers that come from the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from teaching.lessons.answers import (
    VOCABULARY,
    AnswerError,
    engine_state_after,
    evaluate,
    format_value,
    generate_options,
    option_matches,
    parse_expression,
)
from teaching.lessons.loader import LessonError, answer_question, load_lesson, load_lessons, parse_lesson
from teaching.scenarios.library import DESIGN_DOC_EXAMPLE
from teaching.scenarios.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lessons"

GOOD = """\
---
title: A tiny lesson
scenario: |
  blocks 9
  block_size 4
  request a: A B C D E F | output=x
  run
  request b: A B C D E F | output=y   # @b
  run                                 # @b-done
questions:
  - ask: Which blocks does b hit?
    after: b-done
    answer: hit_blocks b
  - ask: How many tokens does b get from the cache?
    after: 6
    answer: num_cached_tokens b
    options: ["0", "4", "6"]
---
Some prose.
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if needle in line)


# -- the shipped course ------------------------------------------------------------------------------
def test_every_shipped_lesson_loads_and_has_questions() -> None:
    lessons, errors = load_lessons(LESSONS)
    assert errors == []
    assert len(lessons) >= 9
    assert [lesson.path.name for lesson in lessons] == sorted(lesson.path.name for lesson in lessons)
    for lesson in lessons:
        assert lesson.title and lesson.body and lesson.questions, lesson.slug
        for question in lesson.questions:
            answer = answer_question(lesson, question)
            assert len(answer.options) >= 2 and len(set(answer.options)) == len(answer.options)
            assert answer.options[answer.correct_index] == answer.text or option_matches(
                answer.options[answer.correct_index], answer.value, question.answer.kind
            )
            assert sum(option_matches(o, answer.value, question.answer.kind) for o in answer.options) == 1


def test_design_doc_lesson_agrees_with_the_spec_table() -> None:
    """SPEC section 7, steps 4 and 6, read off the lesson's questions under each rule."""
    lesson = load_lesson(LESSONS / "07-design-doc-example.md")
    answers = {(q.policy, str(q.answer)): answer_question(lesson, q).value for q in lesson.questions}
    assert answers[("vllm", "free_queue")] == [5, 8, 9, 10, 4, 3]
    assert answers[("classic", "free_queue")] == [8, 9, 10, 5, 4, 3]
    assert answers[("vllm", "evicted_blocks")] == []
    assert answers[("classic", "evicted_blocks")] == [4]
    assert answers[("vllm", "hit_blocks r1")] == [1, 2]


def test_chained_hash_prevents_the_false_hit_a_token_only_hash_gives() -> None:
    lesson = load_lesson(LESSONS / "02-chained-hashing.md")
    values = {str(q.answer): answer_question(lesson, q).value for q in lesson.questions}
    assert values["unchained_hits y"] == 2  # A B C D from z, E F G H from x: collide without parents
    assert values["num_cached_tokens y"] == 4  # the real chained lookup stops after one block


def test_answers_follow_the_engine_not_the_file(tmp_path: Path) -> None:
    """Change the scenario, keep the question: the answer changes with what the engine does."""
    base = load_lesson(write(tmp_path, "a.md", GOOD))
    changed = load_lesson(write(tmp_path, "b.md", GOOD.replace("request b: A B C D E F", "request b: Z B C D E F")))
    assert answer_question(base, base.questions[0]).value == [1]
    assert answer_question(changed, changed.questions[0]).value == []
    # The same expression under the other free rule, on the same scenario, is asked of the engine too.
    scenario = parse_scenario(DESIGN_DOC_EXAMPLE)
    queue = parse_expression("free_queue")
    assert evaluate(queue, engine_state_after(scenario, 11, "vllm")) != evaluate(queue, engine_state_after(scenario, 11, "classic"))


def test_labels_and_end_resolve_to_scenario_lines(tmp_path: Path) -> None:
    lesson = parse_lesson(GOOD, tmp_path / "x.md")
    assert lesson.labels == {"b": 5, "b-done": 6}
    assert [q.after for q in lesson.questions] == [6, 6]
    assert lesson.scenario_line(5) == "request b: A B C D E F | output=y # @b"


# -- broken lessons: clear errors naming file and line -------------------------------------------------
BROKEN = {
    "unclosed.md": ("---\ntitle: x\nscenario: run\n", 1, "never closed"),
    "no-front-matter.md": ("# Just prose\n", 1, "starts with a line '---'"),
    "bad-yaml.md": (GOOD.replace("title: A tiny lesson", "title: [unclosed"), None, "not valid YAML"),
    "unknown-key.md": (GOOD.replace("title: A tiny lesson", "title: A tiny lesson\ncolour: red"), "colour: red", "unknown key 'colour'"),
    "bad-scenario.md": (GOOD.replace("  run\n", "  walk\n", 1), "  walk", "unknown command 'walk'"),
    "bad-answer.md": (GOOD.replace("answer: hit_blocks b", "answer: hits b"), "answer: hits b", "unknown answer 'hits'"),
    "bad-after.md": (GOOD.replace("after: 6", "after: 1"), "after: 1", "not a scenario line that does something"),
    "unknown-request.md": (GOOD.replace("answer: hit_blocks b", "answer: hit_blocks c"), "- ask: Which blocks", "no request 'c'"),
    "wrong-options.md": (GOOD.replace('["0", "4", "6"]', '["0", "6", "8"]'), "- ask: How many tokens", "none of the options"),
    "missing-answer.md": (GOOD.replace("    answer: hit_blocks b\n", ""), "- ask: Which blocks", "has no 'answer:'"),
}


def test_broken_lessons_name_file_and_line_while_good_ones_load(tmp_path: Path) -> None:
    write(tmp_path, "00-good.md", GOOD)
    for name, (text, _, _) in BROKEN.items():
        write(tmp_path, name, text)
    write(tmp_path, "README.md", "not a lesson")
    lessons, errors = load_lessons(tmp_path)
    assert [lesson.slug for lesson in lessons] == ["00-good"]
    by_file = {error.path.name: error for error in errors}
    assert set(by_file) == set(BROKEN)
    for name, (text, where, message) in BROKEN.items():
        error = by_file[name]
        assert message in error.message, (name, str(error))
        assert str(error).startswith(f"{name}, line "), str(error)
        if isinstance(where, int):
            assert error.line == where, (name, str(error))
        elif isinstance(where, str):
            assert error.line == line_of(text, where), (name, str(error))


def test_yaml_error_points_at_the_front_matter_line(tmp_path: Path) -> None:
    text = GOOD.replace("    after: b-done", "    after: b-done\n   bad indent: [")
    with pytest.raises(LessonError) as info:
        load_lesson(write(tmp_path, "y.md", text))
    assert info.value.line is not None and abs(info.value.line - line_of(text, "bad indent")) <= 1


def test_scenario_runtime_error_maps_to_the_file_line(tmp_path: Path) -> None:
    text = GOOD.replace("  request a: A B C D E F | output=x", "  request a: " + " ".join(["w"] * 40) + " | output=x")
    with pytest.raises(LessonError) as info:
        load_lesson(write(tmp_path, "big.md", text))
    assert info.value.line == line_of(text, "request a:")
    assert "KV slots" in info.value.message


# -- the vocabulary ----------------------------------------------------------------------------------
def test_parse_expression_errors_list_the_vocabulary() -> None:
    with pytest.raises(AnswerError, match="free_queue"):
        parse_expression("freequeue")
    with pytest.raises(AnswerError, match="needs one request"):
        parse_expression("hit_blocks")
    with pytest.raises(AnswerError, match="takes nothing"):
        parse_expression("free_queue r1")
    with pytest.raises(AnswerError, match="block number"):
        parse_expression("ref_cnt x")
    assert str(parse_expression("ref_cnt 3")) == "ref_cnt 3"


@pytest.mark.parametrize(
    ("value", "kind", "text", "same", "different"),
    [
        ([7, 5, 8], "blocks", "7, 5, 8", ["[7, 5, 8]", "7 5 8"], ["5, 7, 8", "7, 5"]),
        ([1, 2], "set", "1, 2", ["2, 1"], ["1"]),
        ([], "blocks", "none", ["[]", "none"], ["0"]),
        (None, "block", "none", ["none"], ["1"]),
        (4, "block", "4", ["4"], ["5", "none"]),
        (0.5, "percent", "50%", ["50", "50.0%"], ["0.5", "49%"]),
        (8, "tokens", "8", ["8"], ["4"]),
        ("preempted", "status", "preempted", ["Preempted"], ["waiting"]),
    ],
)
def test_format_and_match(value: object, kind: str, text: str, same: list[str], different: list[str]) -> None:
    assert format_value(value, kind) == text
    assert option_matches(text, value, kind)
    assert all(option_matches(s, value, kind) for s in same)
    assert not any(option_matches(d, value, kind) for d in different)


def test_generated_options_are_stable_distinct_and_hold_one_right_answer() -> None:
    state = engine_state_after(parse_scenario(DESIGN_DOC_EXAMPLE), 10, "vllm")
    for name, word in VOCABULARY.items():
        arg = {"request": "r1", "block": "1", None: None}[word.arg]
        expression = parse_expression(name if arg is None else f"{name} {arg}")
        value = evaluate(expression, state)
        options = generate_options(value, word.kind, state, seed="t")
        assert options == generate_options(value, word.kind, state, seed="t")
        assert len(options) == len(set(options)) >= 2, name
        assert sum(option_matches(o, value, word.kind) for o in options) == 1, (name, options)


def test_readme_documents_every_word_and_key() -> None:
    readme = (LESSONS / "README.md").read_text(encoding="utf-8")
    for name in VOCABULARY:
        assert f"`{name}" in readme, name
    for key in ("title", "summary", "scenario", "policies", "questions", "measure", "ask", "after", "answer", "options", "policy", "explain"):
        assert f"`{key}" in readme, key


def test_loader_does_not_import_streamlit() -> None:
    code = "import sys, teaching.lessons.loader; teaching.lessons.loader.load_lessons('lessons'); assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_measure_spec_parses_and_times_on_the_simulator(tmp_path: Path) -> None:
    from engine.simulator import SimulatorBackend
    from teaching.lessons.measure import measure_ttft

    lesson = load_lesson(LESSONS / "03-shared-system-prompt.md")
    assert lesson.measure is not None and len(lesson.measure.questions) >= 2
    rows = measure_ttft(lesson.measure, SimulatorBackend())
    assert rows[0].cached_tokens == 0  # cold cache
    assert all(r.cached_tokens >= 16 for r in rows[1:])  # the shared system prompt's full blocks
    assert all(r.ttft_on_ms >= 0 and r.ttft_off_ms >= 0 for r in rows)
    bad = GOOD.replace("questions:\n", "measure:\n  system: hi\n  questions: [one]\nquestions:\n", 1)
    with pytest.raises(LessonError, match="at least two questions") as info:
        load_lesson(write(tmp_path, "m.md", bad))
    assert info.value.line == line_of(bad, "questions: [one]")
