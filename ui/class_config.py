"""What ``prefixlab class`` tells the app it started: the router's URL and every replica's endpoints.

The class command starts the app with these environment variables; the Playground's class-server
mode then points at the router, and the Live page connects to every replica on its first visit.
Without them the app behaves as before (nothing is pre-filled, nothing connects by itself).
"""

from __future__ import annotations

import os

CLASS_SERVER_ENV = "PREFIXLAB_CLASS_SERVER_URL"
LIVE_SERVERS_ENV = "PREFIXLAB_LIVE_SERVERS"  # the Live page's text: one "NAME EVENTS REPLAY HTTP" per line


def class_server_url(default: str) -> str:
    return os.environ.get(CLASS_SERVER_ENV) or default


def class_server_started() -> bool:
    """True when the app runs under ``prefixlab class`` (the class-server mode is then on by default)."""
    return bool(os.environ.get(CLASS_SERVER_ENV))


def live_servers(default: str) -> str:
    return os.environ.get(LIVE_SERVERS_ENV, "").replace(";", "\n") or default


def live_autoconnect() -> bool:
    """Connect the Live page on its first visit (only when the class command named the replicas)."""
    return bool(os.environ.get(LIVE_SERVERS_ENV))
