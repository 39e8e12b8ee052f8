"""The scenario format: parsing (good and bad text) and the SPEC section 7 golden trace."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import PrefixLabError
from engine.events import BlockRemoved, BlocksAllocated, BlocksFreed, CacheLookup
from teaching.scenarios.library import BUILTIN_SCENARIOS, DESIGN_DOC_EXAMPLE, builtin_scenario, builtin_titles
from teaching.scenarios.scenario import (
    AddRequest,
    Finish,
    Reset,
    RunAll,
    ScenarioError,
    Step,
    parse_scenario,
    run_scenario,
)

GOOD = """\
# vLLM design-doc example
# second comment line
blocks 11        # num_blocks (block 0 is the null block)
block_size 4
request r0: A B C D E F G H I J K L M N O   | max_tokens=3 output=P Q R
request r1: A B C D E F G H I J k l m n     | salt=tenant1 lora=math max_tokens=2
request r2: [1, 2, 3, 4, 5]                 # token ids instead of words
step            # one engine step
step 3
finish r0       # abort a request now
run             # until every request finished
reset           # reset_prefix_cache
"""


# -- parsing -----------------------------------------------------------------------------------------
def test_parse_good_scenario() -> None:
    sc = parse_scenario(GOOD)
    assert sc.title == "vLLM design-doc example"
    assert sc.description == "second comment line"
    assert (sc.num_blocks, sc.block_size) == (11, 4)
    kinds = [type(a) for a in sc.actions]
    assert kinds == [AddRequest, AddRequest, AddRequest, Step, Step, Finish, RunAll, Reset]
    r0, r1, r2 = sc.actions[:3]
    assert isinstance(r0, AddRequest) and r0.prompt == "A B C D E F G H I J K L M N O"
    assert r0.max_tokens == 3 and r0.output == "P Q R"
    assert isinstance(r1, AddRequest) and (r1.cache_salt, r1.lora_name, r1.max_tokens) == ("tenant1", "math", 2)
    assert isinstance(r2, AddRequest) and r2.prompt == [1, 2, 3, 4, 5] and r2.max_tokens == 1
    assert [a.line_no for a in sc.actions] == [5, 6, 7, 8, 9, 10, 11, 12]
    assert isinstance(sc.actions[4], Step) and sc.actions[4].count == 3
    assert sc.request_ids == ["r0", "r1", "r2"]


def test_output_sets_max_tokens_and_ids_work() -> None:
    sc = parse_scenario("request a: x y | output=[7, 8]\nrequest b: x | output=p q r")
    a, b = sc.actions
    assert isinstance(a, AddRequest) and a.output == [7, 8] and a.max_tokens == 2
    assert isinstance(b, AddRequest) and b.max_tokens == 3


def test_settings_default_to_none() -> None:
    sc = parse_scenario("request a: x y z")
    assert sc.num_blocks is None and sc.block_size is None and sc.title == "Untitled scenario"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("blocks 11\nfrobnicate 3", 2, "unknown command 'frobnicate'"),
        ("blocks eleven", 1, "whole number"),
        ("blocks 1", 1, "at least 2"),
        ("block_size 0", 1, "at least 1"),
        ("blocks 4 5", 1, "one number"),
        ("request r0: A B\nblocks 9", 2, "before the first request"),
        ("\n\nrequest A B C", 3, "colon"),
        ("request : A B", 1, "no id"),
        ("request r0:    ", 1, "prompt is empty"),
        ("request r0: A\nrequest r0: B", 2, "used twice"),
        ("request r0: A | max_tokens=0", 1, "at least 1"),
        ("request r0: A | max_tokens=x", 1, "whole number"),
        ("request r0: A | colour=red", 1, "unknown request option 'colour'"),
        ("request r0: A | max_tokens=1 output=B C", 1, "max_tokens=1"),
        ("request r0: A | salt=", 1, "salt= needs a value"),
        ("request r0: A | stray", 1, "not an option"),
        ("request r0: [1, x]", 1, "list of token ids"),
        ("request r0: A\nstep two", 2, "whole number"),
        ("request r0: A\nstep 0", 2, "at least 1"),
        ("finish r9", 1, "no request 'r9'"),
        ("run now", 1, "takes nothing"),
        ("reset all", 1, "takes nothing"),
    ],
)
def test_bad_lines_name_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text)
    err = info.value
    assert str(err).startswith(f"Line {line}:")
    assert err.line_no == line
    assert words in str(err)
    assert isinstance(err, PrefixLabError) and isinstance(err, ValueError)


def test_runtime_errors_name_the_line() -> None:
    text = "blocks 3\nblock_size 2\nrequest small: a b\nrequest big: a b c d e f g h i j | max_tokens=4\nrun"
    with pytest.raises(ScenarioError) as info:
        run_scenario(text)
    assert info.value.line_no == 4 and "pool" in str(info.value)


def test_bad_engine_setting_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError):
        run_scenario("request a: x", vllm_version="fifo")


# -- playing -----------------------------------------------------------------------------------------
def test_spans_cover_the_log_in_order() -> None:
    run = run_scenario(GOOD)
    assert run.spans[0].start == 0
    for before, after in zip(run.spans, run.spans[1:]):
        assert before.end == after.start
    assert run.spans[-1].end == len(run.events)
    assert run.span_at(1) is run.spans[0]
    assert run.span_at(0) is None
    # r0 had finished by its max_tokens before 'finish r0'; reset worked because run finished everything.
    assert "already finished" in run.spans[5].note
    assert run.spans[-1].note == ""
    assert run.events[-1].kind == "cleared"


def test_finish_aborts_a_running_request() -> None:
    run = run_scenario("request a: x y z w v | max_tokens=5\nstep\nfinish a")
    assert run.engine.get_request("a").status.value == "finished (aborted)"
    assert [e.kind for e in run.events[run.spans[-1].start :]] == ["free", "finish"]


def test_reset_refused_while_blocks_in_use_is_a_note() -> None:
    run = run_scenario("request a: x y z w v | max_tokens=3\nstep\nreset")
    assert "refused" in run.spans[-1].note


def test_sidebar_overrides_scenario_settings() -> None:
    run = run_scenario("blocks 11\nblock_size 4\nrequest a: x", num_blocks=20, block_size=2)
    assert (run.num_blocks, run.block_size) == (20, 2)


def test_scripted_output_uses_the_word_vocabulary() -> None:
    run = run_scenario("request a: x y | output=P Q\nrun")
    assert [run.token_text(t) for t in run.engine.get_request("a").output_token_ids] == ["P", "Q"]


@pytest.mark.parametrize("key", list(BUILTIN_SCENARIOS))
@pytest.mark.parametrize("policy", ["vllm", "classic"])
def test_builtins_run(key: str, policy: str) -> None:
    run = run_scenario(builtin_scenario(key), policy)
    assert not run.engine.has_unfinished_requests()
    assert run.events, key
    assert builtin_titles()[key]


def test_preemption_scenario_preempts() -> None:
    run = run_scenario(builtin_scenario("preemption"))
    assert any(e.kind == "preempt" for e in run.events)


def test_eviction_scenario_evicts() -> None:
    run = run_scenario(builtin_scenario("eviction-pressure"))
    assert any(e.kind == "evicted" for e in run.events)


# -- SPEC section 7, golden ------------------------------------------------------------------------
def _queue_after_free(run, request_id: str) -> list[int]:  # type: ignore[no-untyped-def]
    index = next(i for i, e in enumerate(run.events) if isinstance(e, BlocksFreed) and e.request_id == request_id)
    return list(run.timeline().state_at(index + 1).free_queue)


@pytest.mark.parametrize(
    ("policy", "after_r0", "after_r1", "r2_new", "r2_evicted"),
    [
        ("vllm", [5, 8, 9, 10, 4, 3], [7, 5, 8, 9, 10, 4, 3, 6, 2, 1], [7, 5, 8, 9, 10], []),
        ("classic", [8, 9, 10, 5, 4, 3], [8, 9, 10, 5, 4, 3, 7, 6, 2, 1], [8, 9, 10, 5, 4], [4]),
    ],
)
def test_design_doc_example(policy, after_r0, after_r1, r2_new, r2_evicted) -> None:  # type: ignore[no-untyped-def]
    run = run_scenario(DESIGN_DOC_EXAMPLE, policy)
    events = run.events
    allocs = [(e.request_id, e.block_ids) for e in events if isinstance(e, BlocksAllocated)]
    # Step 1-3 of the table: r0 gets 1-4, then 5; r1 gets 6, 7.
    assert allocs[:3] == [("r0", [1, 2, 3, 4]), ("r0", [5]), ("r1", [6, 7])]
    lookups = {e.request_id: e.hit_block_ids for e in events if isinstance(e, CacheLookup)}
    assert lookups == {"r0": [], "r1": [1, 2], "r2": [1, 2, 3]}
    assert _queue_after_free(run, "r0") == after_r0
    assert _queue_after_free(run, "r1") == after_r1
    assert allocs[3] == ("r2", r2_new)
    evicted = [b for e in events if isinstance(e, BlockRemoved) for b in e.block_ids]
    assert evicted == r2_evicted
    # Block 4 held A..P (cached in step 2); under vllm it is still in the hash table.
    index = next(i for i, e in enumerate(events) if isinstance(e, BlocksAllocated) and e.request_id == "r2")
    state = run.timeline().state_at(index + 1 + len(r2_evicted))  # the allocation, then its evictions
    assert (state.block_hash[4] is not None) == (policy == "vllm")


# -- robustness --------------------------------------------------------------------------------------
WORDS = st.sampled_from(["request", "r0", "r0:", ":", "|", "step", "run", "finish", "reset", "blocks", "block_size",
                         "A", "B", "[1,", "2]", "max_tokens=2", "output=x", "salt=", "lora=m", "#", "3", "-1", "0"])
LINES = st.lists(WORDS, max_size=7).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=8).map("\n".join))
def test_any_text_parses_or_names_a_line(text: str) -> None:
    """A teacher's typo must never become a traceback: parse, run, or a ScenarioError."""
    try:
        run_scenario(parse_scenario(text))
    except ScenarioError as err:
        assert err.line_no is None or 1 <= err.line_no <= max(1, len(text.splitlines()))
        assert str(err).strip()
