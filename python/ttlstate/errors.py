"""One base for every failure ttlstate raises on purpose, each kind with its wire error code.

The state server answers a failed request with the code of the exception (`code`), and the
shim turns that code into the Spark exception users see; anything that is not a
`TtlStateError` is a bug and travels as `ERR_INTERNAL`. The codes are part of the wire
protocol (`server/protocol.py` re-exports them with the frames); they are defined here, with
the exceptions they stand for, so that this module depends on nothing.
"""

from __future__ import annotations

# Error codes carried by RESP_ERROR
ERR_INTERNAL = 1
ERR_BAD_REQUEST = 2
ERR_PROTOCOL_VERSION = 3
ERR_CONF = 4
ERR_VERSION_NOT_FOUND = 5
ERR_CHECKPOINT = 6
ERR_STATE = 7
ERR_ENGINE = 8


class TtlStateError(Exception):
    """A failure ttlstate reports on purpose; `code` is what the state server sends for it."""

    code: int = ERR_INTERNAL


class ConfigurationError(TtlStateError, ValueError):
    """A conf value that is not allowed."""

    code = ERR_CONF


class CheckpointFileError(TtlStateError, RuntimeError):
    """A checkpoint file is missing, unreadable or not what a load needs."""

    code = ERR_CHECKPOINT


class StoreStateError(TtlStateError, RuntimeError):
    """A call that the store's lifecycle does not allow (put after commit, stale handle...)."""

    code = ERR_STATE


class EngineUnavailable(TtlStateError, RuntimeError):
    """The engine the configuration asks for is not built or cannot open."""

    code = ERR_ENGINE


class JvmCheckpointIOError(TtlStateError, OSError):
    """The JVM could not do a checkpoint file operation (remote I/O failed, or the task was
    interrupted because the query stopped): the request fails, but it is not our bug."""

    code = ERR_CHECKPOINT


class ProtocolError(TtlStateError):
    """A malformed frame, or a peer that broke the protocol."""

    code = ERR_BAD_REQUEST


class RequestError(TtlStateError):
    """A request the server refuses, with the code the refusal carries."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def error_code(e: BaseException) -> int:
    """The wire code of `e`: its own for ttlstate's errors, ERR_INTERNAL for everything else."""
    return e.code if isinstance(e, TtlStateError) else ERR_INTERNAL
