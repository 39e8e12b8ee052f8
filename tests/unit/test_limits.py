"""Bounded work: every input that turns into work has a limit and a clear message (issue 13)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.errors import InvalidRequestError
from engine.request import SamplingParams
from prefixlab.cli import main as cli_main
from teaching import limits
from teaching.lessons.loader import load_lessons
from teaching.pages.prefix_probe import RequestSpec, parse_token_ids, probe_prefix_cache
from teaching.scenarios.scenario import ScenarioError, parse_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[2]

#: 500 requests that each decode thousands of tokens: small text, far too much work.
HEAVY = "blocks 4096\nblock_size 256\nmax_num_seqs 1024\n" + "".join(
    f"request r{i}: A B | max_tokens=8192\n" for i in range(500)
) + "run\n"


# -- scenarios ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, needle", [
    ("blocks 99999999999\nrequest r0: A B\nrun", "blocks must be at most 4,096"),
    ("request r0: A | max_tokens=300000000\nstep 1", "max_tokens must be at most"),
    ("request r0: A\nstep 300000000", "step count must be at most 10,000"),
    ("block_size 99999\nrequest r0: A", "block_size must be at most"),
    ("blocks ²\nrequest r0: A", "whole number"),
    ("request r0: " + "A " * 10_000, "the prompt has 10,000 tokens"),
    ("request r0: [" + "9" * 40 + "]", "token id over"),
    ("step\n" * 3_000, "lines; the limit is 2,000"),
    ("# " + "x" * 200_000, "characters long"),
])
def test_scenario_sizes_are_limited_with_a_clear_message(text, needle):
    with pytest.raises(ScenarioError, match=needle):
        parse_scenario(text)


def test_too_many_requests_is_refused():
    text = "".join(f"request r{i}: A\n" for i in range(limits.MAX_REQUESTS + 1))
    with pytest.raises(ScenarioError, match=f"at most {limits.MAX_REQUESTS} requests"):
        parse_scenario(text)


def test_a_run_that_is_too_big_stops_itself_within_its_time_budget():
    start = time.monotonic()
    with pytest.raises(ScenarioError, match="took longer than 0.3 s"):
        run_scenario(HEAVY, time_budget_s=0.3)
    assert time.monotonic() - start < 0.3 + 1.5  # one engine step past the budget at most (a busy CPU adds slack)


def test_sidebar_overrides_are_limited_too():
    with pytest.raises(ScenarioError, match="blocks must be at most"):
        run_scenario("request r0: A\nrun", num_blocks=10**9)


# -- numbers from URLs and lesson fields ---------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("7", 7), ("0", 0), ("²", None), ("٣", None), ("1_0", None), (" 7", None), ("-1", None), ("9" * 5000, None),
    (None, None), ("", None), ("11", None),
])
def test_parse_whole_number(text, expected):
    assert limits.parse_whole_number(text, 0, 10) == expected


# -- the hashing pages ------------------------------------------------------------------------------
def test_hash_pages_refuse_huge_prompts_before_any_work():
    words = " ".join(["w"] * 250_000)
    start = time.monotonic()
    with pytest.raises(limits.LimitError, match="r1's prompt is"):
        probe_prefix_cache(RequestSpec(words), RequestSpec("a b c d"))
    with pytest.raises(limits.LimitError, match="r2's prompt is 3,000 tokens"):
        probe_prefix_cache(RequestSpec("a b"), RequestSpec(" ".join(["w"] * 3_000)))
    with pytest.raises(limits.LimitError, match="cache salt"):
        probe_prefix_cache(RequestSpec("a b", cache_salt="s" * 10_000), RequestSpec("a b"))
    assert time.monotonic() - start < 1.0
    with pytest.raises(InvalidRequestError, match="999,999,999"):
        parse_token_ids("1 " + "9" * 5000)


# -- lessons: one bad file never hides the others ------------------------------------------------------
BAD_LESSONS = {
    "alias-bomb": """\
---
title: Bomb
scenario: |
  request r0: A B C D
  run
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
questions:
  - ask: Boom?
    after: end
    answer: num_free_blocks
    options: [*h, *h]
---
""",
    "python-tag": """\
---
title: Tag
scenario: |
  request r0: A B C D
  run
questions:
  - ask: What?
    after: end
    answer: num_free_blocks
    options: !!python/object/apply:os.getcwd []
---
""",
    "superscript-after": """\
---
title: Superscript
scenario: |
  request r0: A B C D
  run
questions:
  - ask: What?
    after: '²'
    answer: num_free_blocks
---
""",
    "huge-blocks": """\
---
title: Huge
scenario: |
  blocks 99999999999
  request r0: A B C D
  run
---
""",
    "superscript-answer": """\
---
title: Answer
scenario: |
  request r0: A B C D
  run
questions:
  - ask: What?
    after: end
    answer: ref_cnt ²
---
""",
}


@pytest.mark.parametrize("name", list(BAD_LESSONS))
def test_one_bad_lesson_is_reported_and_the_others_load(tmp_path, name):
    (tmp_path / "01-good.md").write_text((ROOT / "lessons" / "01-kv-blocks.md").read_text(encoding="utf-8"))
    (tmp_path / f"02-{name}.md").write_text(BAD_LESSONS[name], encoding="utf-8")
    start = time.monotonic()
    lessons, errors = load_lessons(tmp_path)
    assert [lesson.slug for lesson in lessons] == ["01-good"]
    assert len(errors) == 1 and errors[0].path.name == f"02-{name}.md"
    assert time.monotonic() - start < 10


def test_lesson_errors_say_what_is_wrong(tmp_path):
    for name, text in BAD_LESSONS.items():
        (tmp_path / f"{name}.md").write_text(text, encoding="utf-8")
    (tmp_path / "huge-file.md").write_text("---\n" + "#" * (limits.MAX_LESSON_BYTES + 1), encoding="utf-8")
    _, errors = load_lessons(tmp_path)
    messages = {e.path.stem: str(e) for e in errors}
    assert "aliases" in messages["alias-bomb"]
    assert "tag" in messages["python-tag"] and "python" in messages["python-tag"]
    assert "'²'" in messages["superscript-after"]
    assert "at most 4,096" in messages["huge-blocks"]
    assert "block number" in messages["superscript-answer"]
    assert "bytes" in messages["huge-file"]


# -- the command line --------------------------------------------------------------------------------
def test_replay_refuses_endless_and_non_utf8_files(tmp_path, capsys):
    assert cli_main(["replay", "/dev/zero"]) == 2
    assert "a scenario may be at most" in capsys.readouterr().err
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("request r0: caf\xe9\nrun\n".encode("latin-1"))
    assert cli_main(["replay", str(bad)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_non_finite_temperature_is_refused(value):
    with pytest.raises(InvalidRequestError, match="temperature"):
        SamplingParams(temperature=float(value))


def test_generate_reports_a_nan_temperature_before_loading_the_model(capsys):
    assert cli_main(["generate", "--prompt", "hi", "--temperature", "nan"]) == 2
    err = capsys.readouterr().err
    assert "temperature must be a finite number" in err and "Traceback" not in err
