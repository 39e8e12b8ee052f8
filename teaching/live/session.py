"""The Live page's logic without widgets: subscribers, the state they feed, a recording, metrics.

One :class:`LiveSession` per browser session: it owns one :class:`~teaching.live.subscriber.Subscriber`
thread per server, and everything the page draws is read from it after :meth:`LiveSession.drain`.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from dataclasses import dataclass, field

from engine.errors import PrefixLabError
from teaching.live.client import RequestTally
from teaching.live.diagnose import SILENCE_S, Advice, silence_advice
from teaching.live.frames import Frame, frame_to_json
from teaching.live.metrics import MetricsError, ServerMetrics, fetch_metrics
from teaching.live.state import LiveState
from teaching.live.subscriber import Endpoint, Item, Notice, Subscriber

#: At most this many servers per page (each is a thread and a socket).
MAX_SERVERS = 8
#: Frames kept for the recording download; a longer stream keeps its newest frames.
MAX_RECORDED_FRAMES = 200_000
NOTICES_KEPT = 50
#: One drain applies at most this many items, so a flood cannot freeze the page.
MAX_ITEMS_PER_DRAIN = 20_000


class EndpointError(PrefixLabError):
    """A server line the page cannot use; the message says which and why."""


def parse_endpoints(text: str) -> list[Endpoint]:
    """One server per line: ``NAME EVENTS [REPLAY] [HTTP]``, e.g.
    ``vllm-0 tcp://gpu-box:5557 tcp://gpu-box:5558 http://gpu-box:8000``; ``-`` skips a field."""
    endpoints: list[Endpoint] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) < 2 or len(fields) > 4:
            raise EndpointError(f"line {number}: expected NAME EVENTS [REPLAY] [HTTP], got {len(fields)} fields")
        name, events, *rest = fields
        replay = rest[0] if len(rest) > 0 and rest[0] != "-" else None
        http = rest[1] if len(rest) > 1 and rest[1] != "-" else None
        for address in (events, replay):
            if address is not None and not address.startswith(("tcp://", "ipc://")):
                raise EndpointError(f"line {number}: {address!r} is not a ZMQ address (tcp://host:port)")
        if http is not None and not http.startswith(("http://", "https://")):
            raise EndpointError(f"line {number}: {http!r} is not an http(s) URL")
        if any(e.name == name for e in endpoints):
            raise EndpointError(f"line {number}: the name {name!r} is used twice")
        endpoints.append(Endpoint(name, events, replay, http))
    if not endpoints:
        raise EndpointError("no server given")
    if len(endpoints) > MAX_SERVERS:
        raise EndpointError(f"at most {MAX_SERVERS} servers at once")
    return endpoints


@dataclass
class MetricsView:
    """The latest scrape of one server, the one before it (for 'just now' rates), or the error."""

    latest: ServerMetrics | None = None
    previous: ServerMetrics | None = None
    error: str | None = None
    at: float = 0.0


@dataclass
class LiveSession:
    endpoints: list[Endpoint]
    state: LiveState = field(default_factory=LiveState)
    notices: deque[Notice] = field(default_factory=lambda: deque(maxlen=NOTICES_KEPT))
    recording: deque[Frame] = field(default_factory=lambda: deque(maxlen=MAX_RECORDED_FRAMES))
    metrics: dict[str, MetricsView] = field(default_factory=dict)
    tally: RequestTally = field(default_factory=RequestTally)
    inbox: queue.Queue[Item] = field(default_factory=queue.Queue)
    subscribers: list[Subscriber] = field(default_factory=list)
    started_at: float = field(default_factory=time.monotonic)
    frames_seen: dict[str, int] = field(default_factory=dict)

    def start(self) -> LiveSession:
        self.subscribers = [Subscriber(endpoint, self.inbox).start() for endpoint in self.endpoints]
        for endpoint in self.endpoints:
            self.state.replica(endpoint.name)
        return self

    def stop(self) -> None:
        for subscriber in self.subscribers:
            subscriber.stop()

    def connected(self, name: str) -> bool:
        return any(s.connected for s in self.subscribers if s.endpoint.name == name)

    def ensure_running(self) -> bool:
        """Restart subscribers that stopped (idle, or a bad endpoint); True when one was restarted."""
        restarted = False
        for index, subscriber in enumerate(self.subscribers):
            if not subscriber.alive:
                self.subscribers[index] = Subscriber(subscriber.endpoint, self.inbox).start()
                restarted = True
        return restarted

    def drain(self) -> int:
        """Apply everything the subscribers delivered since the last call; returns how many items."""
        for subscriber in self.subscribers:
            subscriber.touch()
        count = 0
        while count < MAX_ITEMS_PER_DRAIN:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                break
            count += 1
            if isinstance(item, Notice):
                self.notices.append(item)
                if item.kind == "reset":
                    self.state.reset(item.server)
            else:
                self.recording.append(item)
                self.state.apply_frame(item)
                self.frames_seen[item.server] = self.frames_seen.get(item.server, 0) + 1
        return count

    def advice(self, silence_s: float = SILENCE_S) -> list[Advice]:
        """What to check for each server that sent no batch since Connect (after ``silence_s``)."""
        silent_s = time.monotonic() - self.started_at
        found = []
        for endpoint in self.endpoints:
            view = self.metrics.get(endpoint.name)
            advice = silence_advice(endpoint, silent_s=silent_s, frames_seen=self.frames_seen.get(endpoint.name, 0),
                                    connected=self.connected(endpoint.name), metrics=view.latest if view else None,
                                    silence_s=silence_s)
            if advice is not None:
                found.append(advice)
        return found

    def wait_for(self, predicate: object, timeout_s: float) -> bool:
        """Drain until ``predicate(self)`` holds or time runs out (for scripts and tests)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.drain()
            if callable(predicate) and predicate(self):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def refresh_metrics(self) -> None:
        for endpoint in self.endpoints:
            if not endpoint.http:
                continue
            view = self.metrics.setdefault(endpoint.name, MetricsView())
            try:
                scraped = fetch_metrics(endpoint.http)
            except MetricsError as exc:
                view.error = str(exc)
                continue
            view.previous, view.latest, view.error, view.at = view.latest, scraped, None, time.time()

    def recording_text(self) -> str:
        return "".join(frame_to_json(frame) + "\n" for frame in self.recording)
