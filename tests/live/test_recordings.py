"""The shipped recordings of a real vLLM 0.32 server decode, rebuild its cache, and draw."""

from __future__ import annotations

import pytest

from teaching.live.frames import frame_to_json, parse_recording, read_recording
from teaching.live.state import state_from_frames
from tests.live.conftest import RECORDINGS, chat_prompt_ids, load_requests, recording_pairs
from viz.live import cache_history_figure, prefix_tree_figure

PAIRS = recording_pairs()
pytestmark = pytest.mark.skipif(not PAIRS, reason=f"the vLLM recordings are not there ({RECORDINGS.name} beside the repo)")


def full_block_chunks(ids: list[int], block_size: int) -> list[tuple[int, ...]]:
    return [tuple(ids[i:i + block_size]) for i in range(0, len(ids) - block_size + 1, block_size)]


@pytest.mark.parametrize(("frames_path", "requests_path"), PAIRS, ids=[p.stem for p, _ in PAIRS])
def test_recording_round_trips_through_the_jsonl_format(frames_path, requests_path):
    frames = read_recording(frames_path)
    assert [f.seq for f in frames] == list(range(frames[0].seq, frames[0].seq + len(frames)))  # no gap
    again = parse_recording("\n".join(frame_to_json(f) for f in frames))
    assert again == frames


@pytest.mark.parametrize(("frames_path", "requests_path"), PAIRS, ids=[p.stem for p, _ in PAIRS])
def test_every_stored_block_is_a_block_of_a_prompt_that_was_sent(frames_path, requests_path, hf_tokenizer):
    """Replay the events; each stored block's path from its root must spell a sent prompt's prefix."""
    frames = read_recording(frames_path)
    prompts = [chat_prompt_ids(hf_tokenizer, r["request"]["messages"]) for r in load_requests(requests_path)]
    state = state_from_frames(frames)
    assert state.undecodable == 0
    replica = state.replica("")
    assert replica.block_size and replica.total_stored > 0
    size = replica.block_size
    sent = [full_block_chunks(p, size) for p in prompts]
    for key in replica.blocks:
        chain = tuple(b.token_ids for b in replica.prefix_of(key))
        if replica.prefix_of(key)[0].parent is None:  # a root: the first blocks of a sent prompt
            assert any(chunks[:len(chain)] == list(chain) for chunks in sent)
        else:  # its parent was stored before the recording began: a run of blocks inside a prompt
            assert any(chunks[i:i + len(chain)] == list(chain) for chunks in sent for i in range(len(chunks)))
    # every block the recording stored is cached or was removed (removals of earlier blocks aside)
    assert replica.total_stored - (replica.total_removed - replica.unknown_removals) == len(replica.blocks)


@pytest.mark.parametrize(("frames_path", "requests_path"), PAIRS, ids=[p.stem for p, _ in PAIRS])
def test_recording_draws_as_a_tree_with_decoded_text(frames_path, requests_path, hf_tokenizer):
    frames = read_recording(frames_path)
    replica = state_from_frames(frames).replica("")

    def decode(ids):
        return hf_tokenizer.decode(list(ids), skip_special_tokens=False)

    fig = prefix_tree_figure(replica, decode)
    assert len(fig.layout.shapes) == len(replica.blocks)  # one rectangle per cached block
    labels = [t for trace in fig.data if trace.mode == "text" for t in trace.text]
    assert len(labels) == len(replica.blocks)
    roots = [b for b in replica.blocks.values() if b.parent is None]
    assert any("im_start" in decode(b.token_ids) for b in roots)  # a chat prompt's first block
    edges = [trace for trace in fig.data if trace.mode == "lines"][0]
    assert len(edges.x) == 3 * (len(replica.blocks) - len(roots))  # one segment per parent -> child
    if replica.total_removed:
        assert any(trace.mode == "markers" for trace in fig.data)  # evicted blocks drawn as ghosts
    history = cache_history_figure(replica)
    assert list(history.data[0].x) == [f.seq for f in frames]


def test_a_broken_line_says_where():
    from teaching.live.frames import RecordingError

    with pytest.raises(RecordingError, match="line 2"):
        parse_recording('{"topic": "kv", "seq": 0, "payload_b64": ""}\n{"seq": "x"}\n')
