"""Exceptions PrefixLab raises for bad input.

Every error a user can trigger is one of these. They subclass the built-in
``ValueError`` / ``KeyError`` so callers that already catch those keep working,
and they carry a message written for a student, not for a debugger.
"""


class PrefixLabError(Exception):
    """Base class of every error PrefixLab raises on purpose."""


class InvalidRequestError(PrefixLabError, ValueError):
    """A request that can never be served: empty prompt, bad token ids, too long, ..."""


class ConfigError(PrefixLabError, ValueError):
    """An engine or cache setting that makes no sense (block_size < 1, unknown policy, ...)."""


class UnknownRequestError(PrefixLabError, KeyError):
    """A request id the cache manager or engine has never seen (or already forgot)."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text.
        return str(self.args[0]) if self.args else ""


class RequestStateError(PrefixLabError, ValueError):
    """An operation that is illegal in the request's current state (e.g. allocating for a finished one)."""
