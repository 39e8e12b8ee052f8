"""PrefixLab's KV-event wire format is vLLM's: recordings decode, and vLLM decodes ours."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgspec
import pytest

from engine import EngineConfig, LLMEngine, SamplingParams
from engine import events as engine_events
from engine.hashing import external_block_hash
from engine.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    decode_batch,
    decode_seq,
    encode,
    encode_batch,
    encode_seq,
    make_batch,
)
from tests.server.vllm_env import as_builtins, vllm_decode

#: Frames a vLLM 0.32 server published (JSON lines: topic, seq, payload_b64), with the chat
#: requests that produced them in the matching ``.requests.json``.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-kv-events"


def recordings() -> list[Path]:
    found = sorted(FIXTURES.glob("*.jsonl"))
    if not found:
        pytest.skip(f"no vLLM KV-event recordings in {FIXTURES}")
    return found


def frames(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def same_wire_content(ours: bytes, theirs: bytes) -> bool:
    """The same msgpack values with the same keys in the same order. vLLM 0.33's BlockStored has one
    field more than 0.32's (``lookahead_token_ids``): with 17 possible keys msgspec writes a map16
    header where 0.32 wrote a fixmap, so only the header bytes of a stored event differ."""
    return json.dumps(msgspec.msgpack.decode(ours)) == json.dumps(msgspec.msgpack.decode(theirs))


def test_recordings_decode_and_reencode_byte_for_byte():
    """Same field names, order, defaults and options as vLLM: decode + encode gives the same values
    (byte for byte against vLLM 0.33's own encoder: tests/vllm/test_hybrid_differential.py)."""
    for path in recordings():
        seqs = []
        for frame in frames(path):
            payload = base64.b64decode(frame["payload_b64"])
            batch = decode_batch(payload)
            assert batch.data_parallel_rank == 0 and batch.ts > 0 and batch.events
            assert all(isinstance(e, BlockStored | BlockRemoved | AllBlocksCleared) for e in batch.events)
            assert same_wire_content(encode(batch), payload), f"{path.name} seq {frame['seq']}"
            seqs.append(frame["seq"])
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # consecutive, no gaps


def test_recorded_events_have_int64_hashes_and_full_blocks():
    for path in recordings():
        for frame in frames(path):
            for event in decode_batch(base64.b64decode(frame["payload_b64"])).events:
                if isinstance(event, BlockStored | BlockRemoved):
                    assert all(isinstance(h, int) and 0 <= h < 2**64 for h in event.block_hashes)
                if isinstance(event, BlockStored):
                    assert len(event.token_ids) == len(event.block_hashes) * event.block_size


def test_garbage_is_a_decode_error():
    with pytest.raises(msgspec.DecodeError):
        decode_batch(b"\x93\xa3abc")


def test_sequence_frames_are_eight_bytes_big_endian():
    assert encode_seq(1) == b"\x00" * 7 + b"\x01"
    assert decode_seq(encode_seq(2**40 + 5)) == 2**40 + 5
    assert encode_seq(-1) == b"\xff" * 8


def test_int64_hash_is_the_last_eight_bytes():
    digest = bytes(range(32))
    assert external_block_hash(digest) == int.from_bytes(digest[-8:], "big")


def engine_stream() -> tuple[LLMEngine, list[bytes]]:
    """A small simulated run that stores, evicts and clears: one payload per step, as vLLM sends."""
    engine = LLMEngine(EngineConfig(backend="simulator", block_size=4, num_blocks=8))
    payloads = []

    def step_all() -> None:
        while engine.has_unfinished_requests():
            engine.step()
            payload = encode_batch(engine.kv_cache_manager.take_events())
            if payload is not None:
                payloads.append(payload)

    for prompt in ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 9, 9, 9, 9, 9], [20, 21, 22, 23, 24, 25, 26, 27, 28]):
        engine.add_request(prompt, SamplingParams(max_tokens=4))
        step_all()
    engine.reset_prefix_cache()
    payload = encode_batch(engine.kv_cache_manager.take_events())
    assert payload is not None
    payloads.append(payload)
    return engine, payloads


def test_engine_events_translate_one_to_one():
    engine, payloads = engine_stream()
    kinds = [type(e).__name__ for p in payloads for e in decode_batch(p).events]
    assert {"BlockStored", "BlockRemoved", "AllBlocksCleared"} <= set(kinds)
    history = engine.kv_cache_manager.events.events
    stored = [e for e in history if isinstance(e, engine_events.BlockStored)]
    wire_stored = [e for p in payloads for e in decode_batch(p).events if isinstance(e, BlockStored)]
    assert [w.block_hashes for w in wire_stored] == [[external_block_hash(h) for h in e.block_hashes] for e in stored]
    assert [w.token_ids for w in wire_stored] == [e.token_ids for e in stored]


def test_teaching_events_alone_send_nothing():
    assert make_batch([engine_events.StepStarted(step=1)]) is None


def test_vllm_decodes_prefixlab_stream():
    """vLLM's own ``KVEventBatch`` decoder (from a real vLLM venv) reads what we publish."""
    _, payloads = engine_stream()
    assert vllm_decode(payloads) == as_builtins([decode_batch(p) for p in payloads])
