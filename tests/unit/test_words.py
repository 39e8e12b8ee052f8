"""One word for one thing (issue 21, item 3): each slip a student met, pinned by a test.

Every test here failed on the code before the fix: the free queue's empty head called the "next
victim", "evicted" over a block not yet evicted, one block in two colours, a request's own computed
tokens counted as cache hits, a physical block id read as the request's own, three names for two
free rules and a seed note that was wrong for one of them, the Divergence scenario's count, lesson
markup leaking into the lab, and "identical token ids" for prompts SmolLM2 tokenizes differently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.events import BlockStored, RequestScheduled
from engine.simulator import WordTokenizer
from engine.vllm_versions import FREE_POLICY_VERSIONS
from teaching.lessons import flow
from teaching.lessons.answers import engine_state_after
from teaching.lessons.loader import load_lesson
from teaching.pages.playback import event_card, table_states
from teaching.pages.prefix_probe import RequestSpec, probe_prefix_cache
from teaching.pages.why_miss import explain
from teaching.scenarios.describe import describe_event
from teaching.scenarios.library import DIVERGENCE
from teaching.scenarios.scenario import AddRequest, parse_scenario, run_scenario
from viz.block_tables import table_block_state
from viz.blocks import block_state
from viz.free_queue import queue_marks
from viz.theme import STATE_COLORS

ROOT = Path(__file__).resolve().parents[2]
PLAYER_JS = ROOT / "ui" / "lab_player" / "views.js"  # the free queue's marks are drawn there


def _snapshot(scenario: str, upto: int | None = None):
    run = run_scenario(scenario)
    events = run.events if upto is None else run.events[: run.spans[upto - 1].end]
    return run, run.timeline().state_at(len(events)).copy()


FRESH = "blocks 9\nblock_size 4\nrequest r0: a b c d e | output=x y\nstep\n"


# -- the free queue's marks ---------------------------------------------------------------------------
def test_an_empty_never_used_head_is_next_to_be_reused_not_a_victim() -> None:
    _, snap = _snapshot(FRESH)
    head = snap.free_queue[0]
    assert snap.block_hash[head] is None
    marks = queue_marks(snap)
    assert marks == {head: "next to be reused"}


def test_a_cached_block_not_yet_evicted_is_marked_will_be_evicted() -> None:
    lesson = load_lesson(ROOT / "lessons" / "06-free-order-lru.md")
    state = engine_state_after(lesson.scenario, lesson.labels["r2-done"])
    snap = state.snapshot
    marks = queue_marks(snap)
    first_cached = next(b for b in snap.free_queue if snap.block_hash[b] is not None)
    assert snap.free_queue[0] != first_cached
    assert marks[first_cached] == "will be evicted"
    assert state.snapshot.num_evictions == 0  # nothing was evicted yet: the word must say "will be"


def test_the_browser_player_takes_its_queue_words_from_python() -> None:
    js = PLAYER_JS.read_text(encoding="utf-8")
    assert '"evicted ▼"' not in js and '"reused ▼"' not in js and '"next ▼"' not in js
    assert "T.marks" in js
    from ui.lab_player import theme

    assert theme().marks["reused"] == "next to be reused"
    assert theme().marks["evicted"] == "will be evicted"


# -- one colour per state ----------------------------------------------------------------------------
def test_a_block_has_one_colour_in_the_grid_and_in_its_block_table() -> None:
    run, snap = _snapshot("blocks 9\nblock_size 4\nrequest r0: a b c d e f g h i | output=x y z\nstep\n")
    hits: dict[str, set[int]] = {}
    table = snap.block_tables["r0"]
    hashed = [b for b in table if snap.block_hash[b] is not None]
    assert hashed
    for index, block_id in enumerate(table):
        if snap.block_hash[block_id] is None:
            continue  # a partial block: its own state ("not full yet") in the table
        grid = STATE_COLORS[block_state(snap, block_id)]
        assert STATE_COLORS[table_block_state(snap, "r0", block_id, hits)] == grid
        assert STATE_COLORS[table_states(snap, "r0", hits)[index]] == grid


# -- event text: hits vs computed, logical vs physical -------------------------------------------------
def test_a_decode_step_does_not_call_the_requests_own_tokens_cache_hits() -> None:
    run = run_scenario("blocks 9\nblock_size 4\nrequest r0: a b c d e f g h i j k l m n o | output=x y\nrun\n")
    decode = [e for e in run.events if isinstance(e, RequestScheduled) and e.num_computed_tokens]
    assert decode and run.engine.get_request("r0").num_cached_tokens == 0  # nothing came from the cache
    text = describe_event(decode[0], run.token_text)
    assert "already in the cache" not in text and "15" in text


def test_a_stored_block_is_not_named_as_the_requests_own_block_number() -> None:
    run = run_scenario("blocks 9\nblock_size 4\nrequest r0: a b c d | output=x\nrequest y: e f g h i j k l m | output=z\nrun\n")
    stored = [e for e in run.events if isinstance(e, BlockStored) and e.request_id == "y"]
    text = describe_event(stored[0], run.token_text)
    assert not re.search(r"[Bb]locks? [\d, and]+ of y\b", text), text
    assert "physical" in text.lower()


# -- version names and the seed note ---------------------------------------------------------------------
def test_the_two_free_rules_have_one_name_each_everywhere() -> None:
    assert FREE_POLICY_VERSIONS == {"vllm": "vLLM 0.33", "classic": "vLLM 0.23 (classic)"}
    from teaching.pages.compare import SETTINGS
    from teaching.traces.policies import POLICIES

    assert [s[1] for s in SETTINGS if s[0] != "off"] == ["vLLM 0.33", "vLLM 0.23 (classic)"]
    assert POLICIES["vllm"].startswith("vLLM 0.33") and POLICIES["classic"].startswith("vLLM 0.23 (classic)")
    old = re.compile(r"[≥≤]\s?0\.2[34]|>=\s?0\.24|<=\s?0\.23")
    places = [*ROOT.glob("app_pages/*.py"), *ROOT.glob("ui/**/*.py"), *ROOT.glob("ui/lab_player/*.js"),
              *ROOT.glob("teaching/**/*.py"), *ROOT.glob("viz/*.py"), *ROOT.glob("lessons/*.md"), ROOT / "docs" / "scenarios.md"]
    slips = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in places for m in old.finditer(p.read_text(encoding="utf-8"))]
    assert not slips


def test_the_seed_note_is_true_for_each_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    from ui.settings import seed_note

    assert "fixed" in seed_note("sha256", "vllm") and "0.33" in seed_note("sha256", "vllm")
    classic = seed_note("sha256", "classic")
    assert "fixed" not in classic and "random" in classic and "0.23" in classic


def test_lesson_questions_name_the_rule_by_its_version() -> None:
    lesson = load_lesson(ROOT / "lessons" / "07-design-doc-example.md")
    moments = [m for pos in flow.positions(lesson) for m in flow.questions_at(lesson, pos)]
    prompts = " ".join(flow.question_prompt(lesson, m) for m in moments)
    assert "vLLM 0.23 (classic)" in prompts and "vLLM 0.33" in prompts
    assert "classic rule" not in prompts and "vllm rule" not in prompts


# -- the Divergence scenario's own words ------------------------------------------------------------------
def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def test_the_divergence_scenario_says_where_its_prompts_part() -> None:
    tokenizer = WordTokenizer()
    a, b = (tokenizer.encode(str(x.prompt)) for x in parse_scenario(DIVERGENCE).actions if isinstance(x, AddRequest))
    agree = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    said = f"agree on their first {agree} tokens and differ at the {_ordinal(agree + 1)}"
    assert said in " ".join(DIVERGENCE.split())
    docs = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    assert f"agree on {agree} tokens and differ at the {_ordinal(agree + 1)}" in docs
    assert "token 10" not in docs


# -- a lesson opened in the lab ----------------------------------------------------------------------------
def test_a_lesson_opened_in_the_lab_shows_no_markup() -> None:
    lesson = load_lesson(ROOT / "lessons" / "01-kv-blocks.md")
    shown = "\n".join(flow.shown_scenario(lesson))
    assert "@" not in shown
    run = run_scenario(lesson.scenario_text)  # the card reads the source lines as the lesson wrote them
    contents: dict[bytes, list[int]] = {}
    heads = [event_card(run, contents, pos).head for pos in range(len(run.events) + 1)]
    assert not [h for h in heads if "@" in h]
    assert any("after line 5: step" in h for h in heads)


# -- Why did it miss? and a trailing space -----------------------------------------------------------------
def test_a_trailing_space_is_not_called_identical_token_ids() -> None:
    result = probe_prefix_cache(RequestSpec("a b c d e f g h i"), RequestSpec("a b c d e f g h i "))
    text = " ".join(explain(result).reasons)
    assert "identical" not in text
    assert "SmolLM2" in text and "space" in text
