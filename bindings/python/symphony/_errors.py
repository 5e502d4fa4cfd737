"""The exceptions symphony raises.

Every exception derives from :class:`SymphonyError`. Errors in a request
(unknown model, bad input, a full server, a stopped server) are raised by
``infer()`` at call time; what happens to an accepted request later (dropped,
or the model raised) is set on its future.
"""

from __future__ import annotations

__all__ = [
    "SymphonyError",
    "ModelNotFound",
    "InvalidInput",
    "Overloaded",
    "ServerNotRunning",
    "Dropped",
    "ModelError",
    "ConfigError",
]


class SymphonyError(Exception):
    """Base class of every symphony exception."""


class ModelNotFound(SymphonyError, LookupError):
    """The server serves no model of that name (the message lists the models it serves)."""

    def __str__(self) -> str:  # LookupError would quote the message
        return Exception.__str__(self)


class InvalidInput(SymphonyError, ValueError):
    """A request does not match the model: wrong dtype, shape or number of inputs,
    an object that is not a tensor. (A deadline even a batch of one cannot meet is an
    outcome: the future raises Dropped with reason "infeasible".)
    The message names the model, the input and the mismatch."""


class Overloaded(SymphonyError):
    """The server holds as many pending requests as it can (``max_pending``); retry later."""


class ServerNotRunning(SymphonyError, RuntimeError):
    """The server is not started yet, or was stopped."""


class ConfigError(SymphonyError, ValueError):
    """A server, model or simulator configuration is invalid (the message names the key)."""


class Dropped(SymphonyError):
    """The request was accepted but never ran.

    Attributes:
        reason: why, in the scheduler's words: ``"infeasible"`` (its deadline could
            not be met even on arrival), ``"expired"`` (it could no longer finish in
            time while queued), ``"queue_full"``, ``"shutdown"`` (the server stopped
            first), ``"batch_policy"``, ``"cancelled"`` (cancelled while queued),
            ``"overload"`` (refused on arrival: the backlog ahead of it could not
            be served in time) or ``"pushed_out"`` (queued, then dropped under
            overload for a request of a higher priority).
    """

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(message or f"dropped: {reason}")
        self.reason = reason


class ModelError(SymphonyError):
    """The model raised while running the request's batch.

    Attributes:
        message: the model's error message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
