"""The subscriber against a real ZMQ publisher on loopback: gaps, late joins, restarts."""

from __future__ import annotations

import time

from teaching.live.session import LiveSession
from teaching.live.subscriber import Endpoint
from tests.live.conftest import ZMQ_PORTS, free_port
from tests.live.publisher import ReplayingPublisher, removed, stored

WAIT_S = 10.0


def ports() -> tuple[int, int]:
    first = free_port(ZMQ_PORTS)
    return first, free_port(range(first + 1, ZMQ_PORTS.stop))


def session_for(events_port: int, replay_port: int, name: str = "r0") -> LiveSession:
    endpoint = Endpoint(name, f"tcp://127.0.0.1:{events_port}", f"tcp://127.0.0.1:{replay_port}", topic="kv")
    return LiveSession([endpoint]).start()


def kinds(session: LiveSession) -> list[str]:
    return [n.kind for n in session.notices]


def wait_connected(session: LiveSession) -> None:
    assert session.wait_for(lambda s: "connected" in kinds(s) and s.subscribers[0].expected_seq is not None, WAIT_S)
    time.sleep(0.2)  # the SUB socket's subscription reaches the publisher a moment after the connection


def test_a_gap_is_filled_from_the_replay_socket():
    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    session = session_for(events_port, replay_port)
    try:
        wait_connected(session)
        publisher.publish(stored([1, 2], None))
        publisher.publish(stored([3], 2, first_token=8), send=False)  # missed by the subscriber...
        publisher.publish(stored([4], 3, first_token=12), send=False)
        publisher.publish(removed([4]))  # ...until this one shows the gap
        assert session.wait_for(lambda s: s.state.replica("r0").last_seq == 3, WAIT_S), kinds(session)
        replica = session.state.replica("r0")
        assert [f.seq for f in session.recording] == [0, 1, 2, 3]
        assert set(replica.blocks) == {1, 2, 3}
        assert [b.block_hash for b in replica.prefix_of(3)] == [1, 2, 3]
        assert replica.blocks[3].token_ids == (8, 9, 10, 11)
        assert "gap_filled" in kinds(session)
        assert 1 in publisher.replay_requests  # asked from the first missing batch
    finally:
        session.stop()
        publisher.close()


def test_a_late_subscriber_rebuilds_the_cache_from_the_replay_buffer():
    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    publisher.publish(stored([10, 11], None))
    publisher.publish(stored([12], 11, first_token=8))
    publisher.publish(removed([12]))
    session = session_for(events_port, replay_port)
    try:
        assert session.wait_for(lambda s: s.state.replica("r0").last_seq == 2, WAIT_S), kinds(session)
        assert set(session.state.replica("r0").blocks) == {10, 11}
        assert publisher.replay_requests[0] == 0
    finally:
        session.stop()
        publisher.close()


def test_batches_missing_from_the_replay_buffer_are_reported_lost():
    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    session = session_for(events_port, replay_port)
    try:
        wait_connected(session)
        publisher.publish(stored([1], None))
        publisher.publish(stored([2], 1), send=False)
        publisher.buffer.pop()  # the replay buffer no longer has it either
        publisher.publish(stored([3], 2))
        assert session.wait_for(lambda s: s.state.replica("r0").last_seq == 2, WAIT_S)
        assert "gap_lost" in kinds(session)
    finally:
        session.stop()
        publisher.close()


def test_a_restarted_server_is_noticed_and_its_picture_starts_over():
    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    session = session_for(events_port, replay_port)
    try:
        wait_connected(session)
        publisher.publish(stored([1, 2], None))
        publisher.publish(stored([3], 2))
        assert session.wait_for(lambda s: len(s.state.replica("r0").blocks) == 3, WAIT_S)
        publisher.close()  # the server goes away...
        assert session.wait_for(lambda s: "disconnected" in kinds(s), WAIT_S), kinds(session)
        publisher = ReplayingPublisher(events_port, replay_port)  # ...and comes back empty, counting from 0
        assert session.wait_for(lambda s: kinds(s).count("connected") == 2, WAIT_S), kinds(session)
        time.sleep(0.3)
        publisher.publish(stored([7], None))
        assert session.wait_for(lambda s: set(s.state.replica("r0").blocks) == {7}, WAIT_S), kinds(session)
        assert kinds(session).count("reset") == 2
    finally:
        session.stop()
        publisher.close()


def test_a_recorded_stream_replays_into_the_same_picture(tmp_path):
    from teaching.live.frames import read_recording
    from teaching.live.record import main as record
    from teaching.live.state import state_from_frames

    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    publisher.publish(stored([1, 2], None))
    publisher.publish(stored([3], 2, first_token=8))
    publisher.publish(removed([3]))
    out = tmp_path / "kv.jsonl"
    try:
        assert record([f"tcp://127.0.0.1:{events_port}", "--replay", f"tcp://127.0.0.1:{replay_port}",
                       "--out", str(out), "--seconds", "2"]) == 0
    finally:
        publisher.close()
    frames = read_recording(out)
    assert [f.seq for f in frames] == [0, 1, 2]
    replica = state_from_frames(frames).replica("")
    assert set(replica.blocks) == {1, 2} and replica.total_removed == 1
    assert [g.block_hash for g in replica.ghosts] == [3]


def test_without_a_replay_socket_a_restart_still_starts_the_picture_over():
    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    endpoint = Endpoint("r0", f"tcp://127.0.0.1:{events_port}", None, topic="kv")  # no replay endpoint given
    session = LiveSession([endpoint]).start()
    try:
        assert session.wait_for(lambda s: s.subscribers[0].connected, WAIT_S)
        time.sleep(0.3)
        for hashes, parent in (([1], None), ([2], 1), ([3], 2)):
            publisher.publish(stored(hashes, parent))
        assert session.wait_for(lambda s: len(s.state.replica("r0").blocks) == 3, WAIT_S), kinds(session)
        publisher.close()
        assert session.wait_for(lambda s: "disconnected" in kinds(s), WAIT_S)
        publisher = ReplayingPublisher(events_port, replay_port, first_seq=1)  # its batch 0 went unseen
        assert session.wait_for(lambda s: kinds(s).count("connected") == 2, WAIT_S)
        time.sleep(0.3)
        publisher.publish(stored([9], None))
        assert session.wait_for(lambda s: set(s.state.replica("r0").blocks) == {9}, WAIT_S), kinds(session)
        assert "restarted" in kinds(session)
    finally:
        session.stop()
        publisher.close()


def test_an_unwatched_subscriber_stops_itself_and_the_page_restarts_it():
    events_port, replay_port = ports()
    publisher = ReplayingPublisher(events_port, replay_port)
    publisher.publish(stored([1], None))
    session = session_for(events_port, replay_port)
    try:
        assert session.wait_for(lambda s: 1 in s.state.replica("r0").blocks, WAIT_S)
        session.subscribers[0].idle_stop_s = 0.3  # nobody drains from now on
        time.sleep(1.0)
        assert not session.subscribers[0].alive
        assert session.ensure_running()
        publisher.publish(stored([2], 1))
        assert session.wait_for(lambda s: set(s.state.replica("r0").blocks) == {1, 2}, WAIT_S), kinds(session)
        assert "idle_stop" in kinds(session)
    finally:
        session.stop()
        publisher.close()
