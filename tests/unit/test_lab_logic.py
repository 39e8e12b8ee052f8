"""The lab's pure logic: aligning the two policies, predict questions, the log window."""

from __future__ import annotations

from engine.events import BlocksAllocated
from teaching.pages.lab import align_index, build_runs, log_window
from teaching.pages.playback import GUESS, engine_step_at, next_eviction_question, predict_questions, verdict
from teaching.scenarios.library import BUILTIN_SCENARIOS, DESIGN_DOC_EXAMPLE


def test_build_runs_plays_both_policies() -> None:
    runs = build_runs(DESIGN_DOC_EXAMPLE)
    assert set(runs.runs) == {"vllm", "classic"}
    assert runs.title == "Two free-queue rules, one trace: vLLM's own worked example"
    assert any(tokens == [runs.runs["vllm"].engine.tokenizer.vocab[w] for w in "A B C D".split()]
               for tokens in runs.contents["vllm"].values())


def test_align_index_matches_lines_and_skips_evictions() -> None:
    runs = build_runs(DESIGN_DOC_EXAMPLE)
    vllm, classic = runs.runs["vllm"], runs.runs["classic"]
    assert align_index(vllm, classic, 0) == 0
    assert align_index(vllm, classic, len(vllm.events)) == len(classic.events)
    # Identical prefix: same index.
    assert all(align_index(vllm, classic, i) == i for i in range(33))
    # r2's allocation: vllm's event after the touch is the allocation; classic evicts first.
    alloc_v = next(i for i, e in enumerate(vllm.events) if isinstance(e, BlocksAllocated) and e.request_id == "r2") + 1
    alloc_c = next(i for i, e in enumerate(classic.events) if isinstance(e, BlocksAllocated) and e.request_id == "r2") + 1
    assert align_index(vllm, classic, alloc_v) == alloc_c
    assert align_index(classic, vllm, alloc_c) == alloc_v
    assert align_index(classic, vllm, alloc_c - 1) == alloc_v - 1  # both: after the touch, before the allocation
    assert align_index(classic, vllm, alloc_c + 1) == alloc_v  # classic's eviction <-> vllm's allocation
    for i in range(len(vllm.events) + 1):  # always in range and monotonic
        assert 0 <= align_index(vllm, classic, i) <= len(classic.events)
        assert align_index(vllm, classic, i) <= align_index(vllm, classic, i + 1)


def test_next_eviction_question() -> None:
    runs = build_runs(DESIGN_DOC_EXAMPLE)
    assert next_eviction_question(runs.runs["vllm"], 0) is None
    q = next_eviction_question(runs.runs["classic"], 0)
    assert q is not None
    assert (q.request_id, q.answer, q.evicted, q.allocated, q.num_new_blocks) == ("r2", 4, [4], [8, 9, 10, 5, 4], 5)
    assert q.reveal_at == q.ask_at + 2  # past the allocation and then its eviction
    assert isinstance(runs.runs["classic"].events[q.ask_at], BlocksAllocated)
    assert next_eviction_question(runs.runs["classic"], q.reveal_at) is None


def test_eviction_pressure_has_several_questions() -> None:
    run = build_runs(BUILTIN_SCENARIOS["eviction-pressure"]).runs["vllm"]
    questions = []
    q = next_eviction_question(run, 0)
    while q is not None:
        questions.append(q)
        q = next_eviction_question(run, q.reveal_at)
    assert len(questions) >= 2
    assert all(q.answer in q.allocated for q in questions)


def test_predict_questions_carry_their_answers_for_the_player() -> None:
    runs = build_runs(BUILTIN_SCENARIOS["eviction-pressure"])
    run = runs.runs["classic"]
    timeline = run.timeline()
    queues = [list(timeline.state_at(i).free_queue) for i in range(len(run.events) + 1)]
    questions = predict_questions(run, queues)
    assert questions == runs.playback("classic").questions and len(questions) == 2
    first, q = questions[0], next_eviction_question(run, 0)
    assert q is not None
    assert (first.ask_at, first.answer, first.queue) == (q.ask_at, q.answer, queues[q.ask_at])
    assert first.right == verdict(q, q.answer)[1]
    wrong = next(b for b in queues[q.ask_at] if b != q.answer)
    assert first.wrong.replace(GUESS, str(wrong)) == verdict(q, wrong)[1]
    assert "Blocks without a hash are reused silently" in verdict(q, wrong)[1]


def test_engine_step_and_log_window() -> None:
    run = build_runs(DESIGN_DOC_EXAMPLE).runs["vllm"]
    assert engine_step_at(run.events, 0) == 0
    assert engine_step_at(run.events, len(run.events)) == 5
    lines = log_window(run, 10, lambda e: e.kind, before=3, after=2)
    assert [line.index for line in lines] == [8, 9, 10, 11, 12]
    assert [line.current for line in lines] == [False, False, True, False, False]
    assert [line.future for line in lines] == [False, False, False, True, True]


# -- the browser player's data ---------------------------------------------------------------------------
def test_playback_has_every_state_and_the_jumps() -> None:
    from teaching.pages.playback import playback

    runs = build_runs(BUILTIN_SCENARIOS["design-doc"])
    run = runs.runs["classic"]
    data = playback(run, runs.contents["classic"])
    frames = data.frames
    assert len(frames) == len(run.events) + 1 and data.num_blocks == run.num_blocks
    timeline = run.timeline()
    for pos in (0, 4, 22, len(run.events)):
        snap = timeline.state_at(pos)
        assert frames[pos].fq == tuple(snap.free_queue)
        assert frames[pos].ref == tuple(snap.ref_cnt)
        assert [h is None for h in frames[pos].hash] == [h is None for h in snap.block_hash]
    (evict,) = data.jumps["eviction"]
    assert run.events[evict - 1].kind == "evicted" and frames[evict].evicted == (4,)
    assert frames[evict].card.tag == "EVICT"
    assert runs.playback("classic") is runs.playback("classic")  # computed once


def test_alignment_matches_align_index() -> None:
    from teaching.pages.lab import align_index, alignment, build_runs
    from teaching.scenarios.library import BUILTIN_SCENARIOS

    runs = build_runs(BUILTIN_SCENARIOS["eviction-pressure"])
    vllm, classic = runs.runs["vllm"], runs.runs["classic"]
    table = alignment(vllm, classic)
    assert len(table) == len(vllm.events) + 1
    assert table == [align_index(vllm, classic, i) for i in range(len(vllm.events) + 1)]
    assert table == sorted(table)  # never goes back in time
