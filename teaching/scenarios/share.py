"""Custom scenarios in a shareable URL: compressed into it, or kept on the server behind a short id.

A scenario typed in the editor is mirrored into the lab's URL so that reloading or sharing the
link shows it again. Plain text in a query string grows by ~3x when percent-encoded, and a URL of
~100 KB is refused by the server (HTTP 400). So the text travels zlib-compressed and base64url
encoded (``z=...``); one still too long for a URL is kept in a bounded in-memory store and the URL
carries its short id (``sid=...``), which lives as long as the server process.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import threading
import zlib
from collections import OrderedDict

from teaching import limits


@functools.lru_cache(maxsize=64)  # the lab rewrites its URL on every step
def compress_text(text: str) -> str:
    """``text`` as a URL-safe string: zlib, then base64url without padding."""
    return base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii").rstrip("=")


def decompress_text(value: str) -> str | None:
    """The text of :func:`compress_text`, or None for anything else (never more than the scenario limit).

    The output is bounded while decompressing: a small value can inflate to gigabytes (a zip bomb).
    """
    if not isinstance(value, str) or len(value) > 4 * limits.MAX_SCENARIO_CHARS:
        return None
    try:
        data = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data, 4 * limits.MAX_SCENARIO_CHARS + 1)
        if len(raw) > 4 * limits.MAX_SCENARIO_CHARS or not inflater.eof:
            return None
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError, zlib.error, UnicodeDecodeError):
        return None
    return text if len(text) <= limits.MAX_SCENARIO_CHARS else None


class ScenarioStore:
    """Short id -> scenario text, the newest :data:`~teaching.limits.MAX_SHARED_SCENARIOS` kept."""

    def __init__(self, capacity: int = limits.MAX_SHARED_SCENARIOS) -> None:
        self.capacity = capacity
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, text: str) -> str:
        """Store ``text``; its id is a hash of it, so the same scenario always gets the same id."""
        short_id = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        with self._lock:
            self._texts[short_id] = text
            self._texts.move_to_end(short_id)
            while len(self._texts) > self.capacity:
                self._texts.popitem(last=False)
        return short_id

    def get(self, short_id: str) -> str | None:
        with self._lock:
            return self._texts.get(short_id) if isinstance(short_id, str) else None


def url_params(text: str, store: ScenarioStore) -> dict[str, str]:
    """The query parameters that carry ``text``: ``z`` when short enough for a URL, else ``sid``."""
    packed = compress_text(text)
    if len(packed) <= limits.MAX_URL_SCENARIO_CHARS:
        return {"z": packed}
    return {"sid": store.put(text)}


def text_from_params(params: dict[str, str], store: ScenarioStore) -> str | None:
    """The scenario a URL carries (``sid``, ``z``, or the older plain ``text``), or None."""
    if params.get("sid"):
        return store.get(params["sid"])
    if params.get("z"):
        return decompress_text(params["z"])
    text = params.get("text")
    return text if text and len(text) <= limits.MAX_SCENARIO_CHARS else None
