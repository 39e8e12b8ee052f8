"""The player's data contract (teaching.pages.playback, ui.lab_player): typed, checked before it is sent."""

from __future__ import annotations

import msgspec
import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.timeline import block_contents
from teaching.pages.lab import alignment, build_runs
from teaching.pages.playback import EngineTape, Playback, checked, engine_playback, frame, playback
from teaching.scenarios.library import BUILTIN_SCENARIOS
from ui.lab_player import Other, PlayerArgs, player_message, theme


def test_a_scenario_playback_travels_as_the_documented_json() -> None:
    runs = build_runs(BUILTIN_SCENARIOS["design-doc"])
    data = checked(runs.playback("vllm"))
    first_table = next(f["tables"][0] for f in data["frames"] if f["tables"])  # type: ignore[index, union-attr]
    rid, status, ids, states = first_table  # a row is an array, as the player unpacks it
    assert isinstance(rid, str) and isinstance(status, str) and len(ids) == len(states)
    rid_hash, hash_ids, tokens = next(f["hashes"][0] for f in data["frames"] if f["hashes"])  # type: ignore[index, union-attr]
    assert isinstance(rid_hash, str) and hash_ids and isinstance(tokens, str)
    assert msgspec.convert(data, Playback) == runs.playback("vllm")


def test_a_broken_shape_fails_in_python_not_in_the_browser() -> None:
    good = build_runs(BUILTIN_SCENARIOS["design-doc"]).playback("vllm")
    data = msgspec.to_builtins(good)
    data["frames"][3]["ref"] = data["frames"][3]["ref"][:-1]
    with pytest.raises(msgspec.ValidationError, match="one ref count and one hash per block"):
        msgspec.convert(data, Playback)
    data = msgspec.to_builtins(good)
    data["frames"][3]["fq"] = ["4"]
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(data, Playback)
    with pytest.raises(ValueError, match="outside the timeline"):
        PlayerArgs(data=good, data_id="x", step=len(good.frames))
    assert checked(PlayerArgs(data=good, data_id="x", step=0))["mode"] == "lab"
    assert "[data-state=\"cached_free\"]" in theme().css


def test_any_engine_with_events_plays_not_only_a_scenario() -> None:
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=11, block_size=4))
    engine.generate(["A B C D E F G H I", "A B C D E F G H X"], SamplingParams(max_tokens=2))
    events = engine.kv_cache_manager.events.events
    data = engine_playback(engine, str, block_contents(events))
    assert len(data.frames) == len(events) + 1 and data.num_blocks == 11
    assert data.frames[-1].fq == tuple(engine.timeline().state_at(len(events)).free_queue)
    assert data.jumps["hit"] and all(events[i - 1].kind == "touch" for i in data.jumps["hit"])
    assert "line" not in data.frames[1].card.head  # an engine's log has no scenario lines
    assert data == playback(EngineTape(engine, str), block_contents(events))
    checked(data)


def test_a_timeline_walked_once_draws_each_state_as_that_state_drawn_alone() -> None:
    """playback() carries the hit blocks from state to state; frame() alone reads them from the log's start."""
    run = build_runs(BUILTIN_SCENARIOS["eviction-pressure"]).runs["vllm"]
    contents = block_contents(run.events)
    walked = playback(run, contents)
    timeline = run.timeline()
    alone = [frame(run, contents, timeline.state_at(pos), pos) for pos in range(len(run.events) + 1)]
    assert walked.frames == alone
    assert any(state == "hit" for f in alone for row in f.tables for state in row.states)  # hits were drawn


def test_a_long_log_sends_only_its_newest_states() -> None:
    engine = LLMEngine(EngineConfig(backend="simulator", num_blocks=11, block_size=4))
    engine.generate(["A B C D E F G H I", "A B C D E F G H X"], SamplingParams(max_tokens=2))
    events = engine.kv_cache_manager.events.events
    whole = engine_playback(engine, str, block_contents(events), last=None)
    tail = engine_playback(engine, str, block_contents(events), last=10)
    assert (tail.offset, len(tail.frames)) == (len(events) - 10, 11)
    assert tail.frames == whole.frames[-11:]  # the same states, the cards with their true event numbers
    assert all(0 < i <= 10 for targets in tail.jumps.values() for i in targets)
    assert [i + tail.offset for i in tail.jumps["hit"]] == [i for i in whole.jumps["hit"] if i > tail.offset]
    checked(tail)


def test_the_sent_message_is_the_checked_args_with_each_timeline_checked_once() -> None:
    runs = build_runs(BUILTIN_SCENARIOS["design-doc"])
    vllm, classic = runs.playback("vllm"), runs.playback("classic")
    args = PlayerArgs(data=vllm, data_id="x", step=5, other=Other(classic, alignment(runs.runs["vllm"], runs.runs["classic"])),
                      labels=["a", "b"])
    sent = player_message(args)
    whole = msgspec.json.decode(msgspec.json.encode(checked(args)))  # as the browser reads it (tuples are arrays)
    assert msgspec.json.decode(sent["data"]) == whole["data"]  # the timelines go as their JSON
    assert msgspec.json.decode(sent["other_data"]) == whole["other"]["data"] and sent["other"] == {"align": whole["other"]["align"]}
    assert {k: v for k, v in sent.items() if k not in ("theme", "data", "other", "other_data")} == \
        {k: v for k, v in whole.items() if k not in ("data", "other")}
    assert sent["theme"] == checked(theme())
    assert player_message(args)["data"] is sent["data"]  # each timeline is encoded (and checked) once
    broken = msgspec.structs.replace(vllm, frames=[*vllm.frames[:-1], msgspec.structs.replace(vllm.frames[-1], fq=["4"])])
    with pytest.raises(msgspec.ValidationError):  # a new timeline is checked on its first render
        player_message(PlayerArgs(data=broken, data_id="y", step=0))
