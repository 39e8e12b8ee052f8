"""vLLM's KV events over ZMQ: a PUB socket for the live stream, a ROUTER socket for replay.

Each published message is three frames, as vLLM sends them: ``topic``, the batch's sequence
number (8 bytes, big-endian) and the msgpack ``KVEventBatch`` (:mod:`engine.kv_events`). A
subscriber that joins late or misses messages (PUB drops what a slow reader cannot take)
sends the first sequence number it wants to the replay socket and gets every buffered batch
from there, then an end marker with sequence number -1.

ZMQ sockets must not be shared between threads, so one thread owns both sockets; the
engine loop only puts payloads on a queue and never waits for the network.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque

import zmq

from engine.kv_events import END_SEQ, decode_seq, encode_seq
from engine.server.config import KVEventsConfig

logger = logging.getLogger(__name__)

POLL_S = 0.05


def is_bind_endpoint(endpoint: str) -> bool:
    """vLLM's rule: wildcard hosts and ipc/inproc are bound; anything else is connected to."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def describe_endpoint(endpoint: str, replay_endpoint: str | None, topic: str) -> str:
    """The start-up line for a KV-event config: bound (subscribers connect here) or connected (someone
    else must have bound that address, as vLLM's publisher also does for a concrete host)."""
    topic_note = f"topic {topic!r}" if topic else "no topic"
    replay = f"; replay bound on {replay_endpoint}" if replay_endpoint else "; no replay endpoint"
    if is_bind_endpoint(endpoint):
        return f"KV events: PUB bound on {endpoint} (subscribers connect here), {topic_note}{replay}"
    host_port = endpoint.split("://", 1)[-1]
    port = host_port.rsplit(":", 1)[-1]
    return (f"KV events: PUB CONNECTS to {endpoint}, {topic_note}{replay}. As in vLLM, an endpoint with a "
            f"concrete host is connected to, so a subscriber must bind {host_port}; for subscribers (the Live "
            f"page, vllm-router) that connect to this server, use \"endpoint\": \"tcp://*:{port}\"")


class KVEventPublisher:
    def __init__(self, config: KVEventsConfig) -> None:
        self.config = config
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=config.max_queue_size)
        self._buffer: deque[tuple[int, bytes]] = deque(maxlen=config.buffer_steps)
        self._topic = config.topic.encode()
        self._next_seq = 0
        self.dropped = 0
        context: zmq.Context = zmq.Context.instance()
        self._pub = context.socket(zmq.PUB)
        self._pub.set_hwm(config.hwm)
        self._replay: zmq.Socket | None = None
        self.binds = is_bind_endpoint(config.endpoint)
        try:
            if self.binds:
                self._pub.bind(config.endpoint)
            else:
                self._pub.connect(config.endpoint)
            if config.replay_endpoint:
                self._replay = context.socket(zmq.ROUTER)
                self._replay.bind(config.replay_endpoint)
        except zmq.ZMQError as exc:
            self._close_sockets()
            raise OSError(f"Cannot open the KV-event sockets ({config.endpoint}, {config.replay_endpoint}): {exc}") from None
        self._thread = threading.Thread(target=self._run, name="kv-event-publisher", daemon=True)
        self._thread.start()

    def describe(self) -> str:
        """Which way the PUB socket went, in words for the start-up line (a connect surprises people)."""
        return describe_endpoint(self.config.endpoint, self.config.replay_endpoint, self.config.topic)

    def publish(self, payload: bytes) -> None:
        """Queue one batch; never blocks the engine (a full queue drops the batch, as vLLM's would wait)."""
        try:
            self._queue.put_nowait(payload)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout_s: float = 1.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout_s)
        self._close_sockets()

    # -- the publisher thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if self._replay is not None and self._replay.poll(0):
                self._serve_replay()
            try:
                payload = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if payload is None:
                return
            seq = self._next_seq
            self._next_seq += 1
            self._pub.send_multipart((self._topic, encode_seq(seq), payload))
            self._buffer.append((seq, payload))

    def _serve_replay(self) -> None:
        assert self._replay is not None
        frames = self._replay.recv_multipart()
        if len(frames) != 3:  # (client identity, empty delimiter, start seq) from a REQ/DEALER
            logger.warning("Ignoring a malformed replay request of %d frames", len(frames))
            return
        client, _, start = frames
        start_seq = decode_seq(start)
        for seq, payload in list(self._buffer):
            if seq >= start_seq:
                self._replay.send_multipart((client, b"", self._topic, encode_seq(seq), payload))
        self._replay.send_multipart((client, b"", b"", encode_seq(END_SEQ), b""))

    def _close_sockets(self) -> None:
        self._pub.close(linger=0)
        if self._replay is not None:
            self._replay.close(linger=0)
