"""The Live page's state without Streamlit: the server lines, the connection, and what it draws from.

The page keeps one :class:`LivePage` in its session state: Connect and Disconnect call
:meth:`LivePage.connect` and :meth:`LivePage.disconnect`; the views read the
:class:`~teaching.live.session.LiveSession` it holds, radix trees cached per replica, and the
frames a recording replays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import PrefixLabError
from teaching.live.frames import Frame
from teaching.live.radix import RadixTree, build_radix
from teaching.live.session import LiveSession, MetricsView, parse_endpoints
from teaching.live.state import LiveState, ReplicaState

#: The page's first server line: a vLLM with its KV events on 5557 (replay 5558) and HTTP on 8000.
DEFAULT_SERVERS = "vllm tcp://127.0.0.1:5557 tcp://127.0.0.1:5558 http://127.0.0.1:8000"
LIVE, RECORDING = "live", "recording"  # what the page draws: the servers now, or a recording replayed


@dataclass
class LivePage:
    """One browser's Live page: what it connects to, the connection, the trees it last built."""

    servers: str = DEFAULT_SERVERS  # one server per line: NAME EVENTS REPLAY HTTP
    source: str = LIVE
    decode_tokens: bool = True  # blocks drawn as the default model's words, not token ids
    session: LiveSession | None = None
    error: str | None = None
    autoconnected: bool = False  # under `prefixlab class` the first visit connects once by itself
    radix_cache: dict[str, tuple[int, int, int, RadixTree]] = field(default_factory=dict)

    def connect(self, servers: str | None = None) -> None:
        """(Re)connect to the servers' lines (the page's own when ``servers`` is None); a bad line is
        kept in :attr:`error`, in the page's words."""
        self.servers = self.servers if servers is None else servers
        self.disconnect()
        try:
            self.session = LiveSession(parse_endpoints(self.servers)).start()
        except PrefixLabError as exc:
            self.error = str(exc)
            return
        self.error = None

    def disconnect(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session = None

    def autoconnect(self, wanted: bool) -> None:
        """Connect once, on the first visit, when the class command asked for it."""
        if wanted and not self.autoconnected:
            self.autoconnected = True
            self.connect()

    def recorded_frames(self) -> list[Frame]:
        """What this page recorded from the live servers, to replay."""
        return list(self.session.recording) if self.session is not None else []

    def radix_of(self, replica: ReplicaState) -> RadixTree:
        """The replica's radix tree, rebuilt only when a batch changed it (the views redraw every second)."""
        stamp = (id(replica), replica.batches, len(replica.blocks))
        cached = self.radix_cache.get(replica.name)
        if cached is None or cached[:3] != stamp:
            cached = (*stamp, build_radix(replica))
            self.radix_cache[replica.name] = cached
        return cached[3]

    def replica_numbers(self, state: LiveState, metrics: dict[str, MetricsView]) -> list[dict[str, object]]:
        """One row per replica: the numbers to compare side by side."""
        rows = []
        for replica in state.replicas.values():
            view = metrics.get(replica.name)
            latest = view.latest if view else None
            hit = latest.hit_rate if latest else None
            usage = latest.kv_cache_usage if latest else None
            ttft = latest.mean_ttft_s if latest else None
            tree = self.radix_of(replica)
            rows.append({
                "replica": replica.name or "server", "cached blocks": len(replica.blocks),
                "cached tokens": replica.cached_tokens(), "runs": len(tree.by_id),
                "prefixes": sum(r.leaves for r in tree.roots),
                "stored": replica.total_stored, "evicted": replica.total_removed,
                "hit rate": "–" if hit is None else f"{hit:.0%}", "KV usage": "–" if usage is None else f"{usage:.0%}",
                "running / waiting": "–" if latest is None or latest.requests_running is None
                else f"{latest.requests_running:.0f} / {latest.requests_waiting or 0:.0f}",
                "mean TTFT (ms)": "–" if ttft is None else f"{ttft * 1000:.0f}",
            })
        return rows
