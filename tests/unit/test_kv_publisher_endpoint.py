"""The KV-event publisher binds or connects by vLLM's rule, and says which at start-up."""

from __future__ import annotations

import socket

import zmq

from engine.kv_events import decode_seq
from engine.server.config import KVEventsConfig
from engine.server.kv_publisher import KVEventPublisher, describe_endpoint, is_bind_endpoint


def free_tcp_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_vllm_rule_wildcards_and_ipc_bind_concrete_hosts_connect():
    assert is_bind_endpoint("tcp://*:5557")
    assert is_bind_endpoint("tcp://[::]:5557")
    assert is_bind_endpoint("ipc:///tmp/kv")
    assert not is_bind_endpoint("tcp://127.0.0.1:5567")
    assert not is_bind_endpoint("tcp://localhost:5567")


def test_start_up_line_names_the_way_and_the_fix():
    bound = describe_endpoint("tcp://*:5557", "tcp://*:5558", "")
    assert "bound on tcp://*:5557" in bound and "subscribers connect here" in bound
    connected = describe_endpoint("tcp://127.0.0.1:5567", None, "kv")
    assert "CONNECTS to tcp://127.0.0.1:5567" in connected
    assert '"endpoint": "tcp://*:5567"' in connected  # the exact config that lets subscribers connect


def test_concrete_host_connects_to_a_binding_subscriber():
    """As vLLM's ZmqEventPublisher: with tcp://127.0.0.1:PORT the publisher connects, so a SUB that
    binds that address receives the batches."""
    port = free_tcp_port()
    context = zmq.Context.instance()
    sub = context.socket(zmq.SUB)
    sub.bind(f"tcp://127.0.0.1:{port}")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    publisher = KVEventPublisher(KVEventsConfig(enable_kv_cache_events=True, endpoint=f"tcp://127.0.0.1:{port}"))
    try:
        assert publisher.binds is False
        frames = None
        for _ in range(100):  # a connecting PUB drops what it sends before the link is up: resend until heard
            publisher.publish(b"payload")
            if sub.poll(100):
                frames = sub.recv_multipart()
                break
        assert frames is not None, "the subscriber bound on the endpoint heard nothing"
        topic, seq, payload = frames
        assert (topic, payload) == (b"", b"payload") and decode_seq(seq) >= 0
    finally:
        publisher.close()
        sub.close(linger=0)
