"""Subscribe to one server's KV events, in order and without holes, across drops and restarts.

vLLM publishes each ``KVEventBatch`` once on a PUB socket; a subscriber that joins late or misses
frames (the PUB socket drops them when a subscriber is slow or not yet connected) asks the replay
socket, a ROUTER, to resend from a sequence number: it sends ``(empty, seq as 8 bytes)`` and gets
``(empty, topic, seq, payload)`` per buffered batch, then ``(empty, empty, -1, empty)``.

Rules kept here:

* a (re)connection starts a new *epoch*: the replica's picture is reset and rebuilt from the
  replay buffer, because a server that restarted has an empty cache and counts from 0 again;
* a sequence number above the expected one is a gap: fill it from the replay socket, or say how
  many batches were lost;
* a number below the expected one is a duplicate (dropped), unless it is 0 or the first after a
  reconnection: then the server restarted (this is how a restart shows without a replay socket).

The thread only moves frames and notices into a queue; the page drains it. ZMQ sockets are not
thread-safe, so every socket lives and dies in this thread.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import zmq
from zmq.utils.monitor import recv_monitor_message

from engine.kv_events import END_SEQ, encode_seq
from teaching.live.frames import Frame, RecordingError, frame_from_parts, seq_from_bytes

#: How long to wait for the replay socket's end marker before calling the replay unavailable.
REPLAY_TIMEOUT_S = 2.0
#: ZMQ reconnects by itself; these bound how often it retries a server that is down.
RECONNECT_IVL_MS = 200
RECONNECT_IVL_MAX_MS = 2000
POLL_MS = 100
#: A subscriber nobody reads from (the page was closed) stops itself after this long.
IDLE_STOP_S = 600.0


@dataclass(frozen=True)
class Endpoint:
    """Where one server (replica) publishes: KV-event PUB, replay ROUTER, and its HTTP API."""

    name: str
    events: str  # e.g. tcp://host:5557
    replay: str | None = None  # e.g. tcp://host:5558
    http: str | None = None  # e.g. http://host:8000 (for /metrics and requests)
    topic: str = ""  # "" subscribes to every topic


@dataclass(frozen=True)
class Notice:
    """Something the page should say about a connection.

    ``kind``: ``connected``, ``disconnected``, ``reset`` (forget this replica's picture: what follows
    is its history from the start), ``restarted``, ``gap_filled``, ``gap_lost``, ``partial_history``,
    ``replay_unavailable``, ``bad_frame``.
    """

    server: str
    kind: str
    text: str
    at: float


Item = Frame | Notice


def request_replay(ctx: zmq.Context, endpoint: str, start_seq: int, server: str = "",
                   timeout_s: float = REPLAY_TIMEOUT_S) -> list[Frame] | None:
    """Every buffered batch from ``start_seq`` on, in order; None when the replay socket does not answer."""
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        sock.send_multipart([b"", encode_seq(start_seq)])
        frames: list[Frame] = []
        deadline = time.monotonic() + timeout_s
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not sock.poll(left_ms):
                return None
            parts = sock.recv_multipart()
            if len(parts) != 4 or parts[0] != b"":
                continue  # not vLLM's replay envelope; ignore rather than crash
            if seq_from_bytes(parts[2]) == END_SEQ:
                return frames
            frames.append(frame_from_parts(parts[1:], server))
    finally:
        sock.close()


class Subscriber:
    """A background thread subscribed to one endpoint, feeding ``sink`` with frames and notices."""

    def __init__(self, endpoint: Endpoint, sink: queue.Queue[Item], *, replay_timeout_s: float = REPLAY_TIMEOUT_S,
                 idle_stop_s: float = IDLE_STOP_S):
        self.endpoint = endpoint
        self.idle_stop_s = idle_stop_s
        self.last_read = time.monotonic()
        self.sink = sink
        self.replay_timeout_s = replay_timeout_s
        self.expected_seq: int | None = None
        self.connected = False
        self.frames_received = 0
        self._just_reconnected = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"kv-events-{endpoint.name}")

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> Subscriber:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def touch(self) -> None:
        """The reader is still there (Streamlit has no hook for a closed browser tab)."""
        self.last_read = time.monotonic()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- what the thread does -----------------------------------------------------------------------
    def _say(self, kind: str, text: str) -> None:
        self.sink.put(Notice(self.endpoint.name, kind, text, time.time()))

    def _deliver(self, frame: Frame) -> None:
        self.sink.put(frame)
        self.expected_seq = frame.seq + 1
        self.frames_received += 1

    def _replay(self, ctx: zmq.Context, start_seq: int) -> list[Frame] | None:
        if not self.endpoint.replay:
            return None
        return request_replay(ctx, self.endpoint.replay, start_seq, self.endpoint.name, self.replay_timeout_s)

    def _on_connected(self, ctx: zmq.Context) -> None:
        """A new epoch: rebuild this replica's picture from the replay buffer (if there is one)."""
        self.connected = True
        self._say("connected", f"{self.endpoint.name}: connected to {self.endpoint.events}")
        history = self._replay(ctx, 0)
        if history is None:
            if self.endpoint.replay:
                self._say("replay_unavailable", f"{self.endpoint.name}: the replay socket {self.endpoint.replay} "
                          "did not answer; showing events from now on")
            self._just_reconnected = self.expected_seq is not None  # the next frame tells if it restarted
            return
        self._say("reset", f"{self.endpoint.name}: rebuilt from the server's replay buffer ({len(history)} batches)")
        if history and history[0].seq > 0:
            self._say("partial_history", f"{self.endpoint.name}: the replay buffer starts at batch {history[0].seq}; "
                      "blocks stored before it are not shown")
        for frame in history:
            self._deliver(frame)
        if not history:
            self.expected_seq = 0

    def _on_frame(self, ctx: zmq.Context, frame: Frame) -> None:
        expected = self.expected_seq
        reconnected, self._just_reconnected = self._just_reconnected, False
        if expected is None or frame.seq == expected:
            self._deliver(frame)
        elif frame.seq > expected:
            self._fill_gap(ctx, expected, frame)
        elif frame.seq == 0 or reconnected:  # counting again from the start: a new server process
            self._say("restarted", f"{self.endpoint.name}: sequence numbers started again at 0 (the server "
                      "restarted); its cache picture starts over")
            self._say("reset", f"{self.endpoint.name}: cache picture reset")
            self._deliver(frame)
        # else: a batch we already have (it arrived both from the replay and the PUB socket)

    def _fill_gap(self, ctx: zmq.Context, expected: int, frame: Frame) -> None:
        replayed = self._replay(ctx, expected) or []
        wanted = [f for f in replayed if expected <= f.seq < frame.seq]
        for missing in wanted:
            if self.expected_seq is not None and missing.seq >= self.expected_seq:
                self._deliver(missing)
        lost = frame.seq - expected - len(wanted)
        if lost == 0:
            self._say("gap_filled", f"{self.endpoint.name}: batches {expected}..{frame.seq - 1} were missed and "
                      "filled from the replay socket")
        else:
            self._say("gap_lost", f"{self.endpoint.name}: {lost} of batches {expected}..{frame.seq - 1} are lost "
                      "(not in the replay buffer); the picture may be missing blocks")
        self._deliver(frame)

    def _run(self) -> None:
        ctx: zmq.Context = zmq.Context.instance()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        sub.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        sub.setsockopt(zmq.SUBSCRIBE, self.endpoint.topic.encode("utf-8"))
        monitor = sub.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        poller = zmq.Poller()
        poller.register(monitor, zmq.POLLIN)
        poller.register(sub, zmq.POLLIN)
        try:
            sub.connect(self.endpoint.events)
        except zmq.ZMQError as exc:
            self._say("bad_endpoint", f"{self.endpoint.name}: cannot use {self.endpoint.events!r}: {exc}")
            sub.close()
            return
        try:
            while not self._stop.is_set():
                if time.monotonic() - self.last_read > self.idle_stop_s:
                    self._say("idle_stop", f"{self.endpoint.name}: nobody watched for {self.idle_stop_s:.0f} s; stopped")
                    break
                ready = dict(poller.poll(POLL_MS))
                if monitor in ready:  # before frames: a reconnect must reset before new frames apply
                    event = recv_monitor_message(monitor)["event"]
                    if event == zmq.EVENT_CONNECTED:
                        self._on_connected(ctx)
                    elif event == zmq.EVENT_DISCONNECTED and self.connected:
                        self.connected = False
                        self._say("disconnected", f"{self.endpoint.name}: connection lost; reconnecting by itself")
                    continue
                if sub in ready:
                    parts = sub.recv_multipart()
                    try:
                        frame = frame_from_parts(parts, self.endpoint.name)
                    except RecordingError as exc:
                        self._say("bad_frame", f"{self.endpoint.name}: ignored a malformed frame ({exc})")
                        continue
                    self._on_frame(ctx, frame)
        finally:
            sub.disable_monitor()
            monitor.close()
            sub.close()
