"""Whose ``cache_salt`` a request may use: the salt policy of ``prefixlab serve``.

vLLM takes ``cache_salt`` from the request body as it is, so on a shared server anyone who knows
(or guesses) a classmate's salt shares the classmate's cached blocks, and with them the timing
side channel the salt was meant to close. In a classroom the salt must belong to a key:

* ``bound`` (the default): a student's salt is bound to the key that sent it. The engine hashes
  ``<the key's own secret tag>/<the salt sent>``, so the same salt sent with another key is a
  different salt: no hit on the first key's blocks, and no timing difference to read. Requests
  without a salt share the cache as in vLLM (that is what the room's shared-prompt demo shows).
* ``isolated``: every student request is salted with its key's tag, salt or no salt: students
  never share a block, even for a common system prompt.
* ``free``: vLLM's behaviour, the salt as sent (for demonstrating the leak on purpose).

The teacher's requests keep their salt as sent, so the teacher can still show what vLLM does.
The tag is an HMAC of the client's identity under a secret drawn when the server starts: it never
reveals a key, and no one can compute another key's tag.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from engine.errors import ConfigError

SALT_POLICIES = ("bound", "isolated", "free")
DEFAULT_SALT_POLICY = "bound"
TAG_HEX_CHARS = 16  # 64 bits: enough that no two clients of a room ever share a tag


class SaltBinder:
    """Turns the salt a request sent into the salt the engine hashes, under one policy."""

    def __init__(self, policy: str = DEFAULT_SALT_POLICY, secret: bytes | None = None) -> None:
        if policy not in SALT_POLICIES:
            raise ConfigError(f"Unknown cache-salt policy {policy!r}; choose one of {list(SALT_POLICIES)}.")
        self.policy = policy
        self._secret = secret if secret is not None else os.urandom(32)

    def tag(self, client: str) -> str:
        """The client's own salt prefix: stable while the server runs, secret to everyone else."""
        digest = hmac.new(self._secret, client.encode("utf-8"), hashlib.sha256).hexdigest()
        return f"key-{digest[:TAG_HEX_CHARS]}"

    def salt_for(self, client: str, is_teacher: bool, sent: str | None) -> str | None:
        """The engine's ``cache_salt`` for a request from ``client`` that sent ``sent``."""
        if self.policy == "free" or is_teacher:
            return sent
        if sent is None and self.policy == "bound":
            return None
        return self.tag(client) + ("" if sent is None else f"/{sent}")
