"""The Live page's state without Streamlit: connect, disconnect, autoconnect once, trees rebuilt only on change."""

from __future__ import annotations

import time

from engine.kv_events import BlockStored
from teaching.live.page import DEFAULT_SERVERS, LivePage
from teaching.live.state import LiveState
from tests.live.conftest import ZMQ_PORTS, free_port


def store(state: LiveState, name: str, hashes: list[int], parent: int | None) -> None:
    replica = state.replica(name)
    event = BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=list(range(4 * len(hashes))),
                        block_size=4, lora_id=None, medium="GPU", lora_name=None)
    replica.apply(replica.batches, time.time(), [event])


def test_a_bad_line_is_an_error_and_no_connection() -> None:
    page = LivePage()
    assert page.servers == DEFAULT_SERVERS
    page.connect("vllm not-an-endpoint")
    assert page.session is None and page.error and "not a ZMQ address" in page.error
    assert page.servers == "vllm not-an-endpoint"  # kept, so the student can fix it


def test_connect_then_disconnect_and_autoconnect_runs_once() -> None:
    port = free_port(ZMQ_PORTS)  # nothing publishes there: the subscriber waits
    page = LivePage(servers=f"lab tcp://127.0.0.1:{port} - -")
    try:
        page.autoconnect(False)
        assert page.session is None and not page.autoconnected
        page.autoconnect(True)
        first = page.session
        assert first is not None and [e.name for e in first.endpoints] == ["lab"] and page.error is None
        page.autoconnect(True)
        assert page.session is first  # the first visit only
        page.connect()
        assert page.session is not first  # Connect starts afresh
    finally:
        page.disconnect()
    assert page.session is None and page.recorded_frames() == []


def test_trees_are_cached_until_a_batch_changes_the_replica() -> None:
    page, state = LivePage(), LiveState()
    store(state, "a", [1, 2, 3], None)
    store(state, "b", [9], None)
    replica = state.replicas["a"]
    tree = page.radix_of(replica)
    assert page.radix_of(replica) is tree
    store(state, "a", [4], 2)
    again = page.radix_of(replica)
    assert again is not tree and again.blocks == 4
    rows = page.replica_numbers(state, {})
    assert [(r["replica"], r["cached blocks"], r["prefixes"], r["hit rate"]) for r in rows] == [
        ("a", 4, 2, "–"), ("b", 1, 1, "–")]
