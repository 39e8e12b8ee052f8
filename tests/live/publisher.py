"""A small real ZMQ publisher speaking vLLM's KV-event protocol, for the subscriber's tests.

PUB frames ``(topic, seq, payload)``; a ROUTER replay socket that answers ``(empty, start seq)``
with every buffered batch from that number, then the end marker. ``publish(..., send=False)``
buffers a batch without sending it, which is exactly what a subscriber that missed it sees.
"""

from __future__ import annotations

import threading
import time

import zmq

from engine.kv_events import END_SEQ, BlockRemoved, BlockStored, KVEventBatch, decode_seq, encode, encode_seq


class ReplayingPublisher:
    def __init__(self, events_port: int, replay_port: int, topic: str = "kv", first_seq: int = 0):
        self.ctx = zmq.Context.instance()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.bind(f"tcp://127.0.0.1:{events_port}")
        self.replay = self.ctx.socket(zmq.ROUTER)
        self.replay.setsockopt(zmq.LINGER, 0)
        self.replay.bind(f"tcp://127.0.0.1:{replay_port}")
        self.topic = topic.encode()
        self.seq = first_seq
        self.buffer: list[tuple[int, bytes]] = []
        self.replay_requests: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve_replay, daemon=True)
        self._thread.start()

    def _serve_replay(self) -> None:
        while not self._stop.is_set():
            if not self.replay.poll(50):
                continue
            client, empty, start = self.replay.recv_multipart()
            first = decode_seq(start)
            self.replay_requests.append(first)
            for seq, payload in list(self.buffer):
                if seq >= first:
                    self.replay.send_multipart([client, b"", self.topic, encode_seq(seq), payload])
            self.replay.send_multipart([client, b"", b"", encode_seq(END_SEQ), b""])

    def publish(self, payload: bytes, send: bool = True) -> int:
        seq = self.seq
        self.seq += 1
        self.buffer.append((seq, payload))
        if send:
            self.pub.send_multipart([self.topic, encode_seq(seq), payload])
        return seq

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.pub.close()
        self.replay.close()


def stored(hashes: list[int], parent: int | None, block_size: int = 4, first_token: int = 0) -> bytes:
    """A batch storing a chain of blocks whose tokens count up from ``first_token``."""
    tokens = list(range(first_token, first_token + block_size * len(hashes)))
    event = BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=block_size,
                        lora_id=None, medium="GPU", lora_name=None)
    return encode(KVEventBatch(ts=time.time(), events=[event]))


def removed(hashes: list[int]) -> bytes:
    return encode(KVEventBatch(ts=time.time(), events=[BlockRemoved(block_hashes=hashes, medium="GPU")]))
