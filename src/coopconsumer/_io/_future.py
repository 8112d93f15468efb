"""``PendingRequest``: the small, single-threaded future returned by ``send``.

It is completed by the I/O loop that owns it (``BrokerConnection``/``KafkaClient``) and
its callbacks run on that loop's thread, at the end of ``poll()``, never re-entrantly in
the middle of socket handling. Standard library only; no sockets, no threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from .._session import api_name

if TYPE_CHECKING:
    from .._protocol._schema import Request, Response

__all__ = ["PendingRequest", "api_name"]

log = logging.getLogger(__name__)

_R = TypeVar("_R", bound="Response")


class PendingRequest(Generic[_R]):
    """One request sent to a broker and its eventual answer.

    Not thread-safe: use it from the thread that drives the client's ``poll()``.
    ``api_version`` and ``correlation_id`` are None until the request is written to a
    negotiated connection.
    """

    __slots__ = (
        "_callbacks",
        "_done",
        "_exception",
        "_result",
        "api_key",
        "api_version",
        "broker",
        "correlation_id",
        "deadline",
        "node_id",
        "request",
    )

    def __init__(
        self,
        request: Request,
        *,
        node_id: int,
        broker: str,
        deadline: float,
        api_version: int | None = None,
    ) -> None:
        self.request = request
        self.api_key: int = type(request).API_KEY
        self.api_version = api_version
        self.correlation_id: int | None = None
        self.node_id = node_id
        self.broker = broker
        #: Monotonic time (seconds) after which the request fails with a timeout.
        self.deadline = deadline
        self._done = False
        self._result: _R | None = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[PendingRequest[_R]], object]] = []

    @property
    def api_name(self) -> str:
        """The API's name, e.g. ``"JoinGroup"``."""
        return api_name(type(self.request))

    def done(self) -> bool:
        """Whether the request has an answer or an error."""
        return self._done

    def succeeded(self) -> bool:
        """Whether the request is done and got a decoded response."""
        return self._done and self._exception is None

    def failed(self) -> bool:
        """Whether the request is done with an error."""
        return self._done and self._exception is not None

    def result(self) -> _R:
        """The decoded response; raises the request's typed error if it failed.

        Raises ``RuntimeError`` if called before ``done()``: nothing can block here, the
        owner's ``poll()`` must run first. Broker error codes inside the response are
        not raised (see ``raise_for_error``).
        """
        if not self._done:
            raise RuntimeError(f"{self!r} is not done yet: drive the client's poll()")
        if self._exception is not None:
            raise self._exception
        assert self._result is not None
        return self._result

    def exception(self) -> BaseException | None:
        """The error the request failed with, None if it succeeded.

        Raises ``RuntimeError`` if called before ``done()``.
        """
        if not self._done:
            raise RuntimeError(f"{self!r} is not done yet: drive the client's poll()")
        return self._exception

    def add_done_callback(self, fn: Callable[[PendingRequest[_R]], object]) -> None:
        """Call ``fn(self)`` once the request completes.

        Callbacks run on the polling thread at the end of ``poll()``; if the request is
        already done, ``fn`` runs immediately. An exception raised by ``fn`` is logged
        and swallowed so that one bad callback cannot stall the I/O loop.
        """
        if self._done:
            _invoke(fn, self)
        else:
            self._callbacks.append(fn)

    # -- owner side -------------------------------------------------------------------

    def _set_result(self, response: _R) -> bool:
        """Complete successfully; returns False if already completed."""
        if self._done:
            return False
        self._result = response
        self._done = True
        return True

    def _set_exception(self, exc: BaseException) -> bool:
        """Complete with an error; returns False if already completed."""
        if self._done:
            return False
        self._exception = exc
        self._done = True
        return True

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _invoke(fn, self)

    def __repr__(self) -> str:
        version = "?" if self.api_version is None else str(self.api_version)
        if not self._done:
            state = "pending"
        elif self._exception is None:
            state = "ok"
        else:
            state = f"failed: {type(self._exception).__name__}"
        return f"<PendingRequest {self.api_name} v{version} to {self.broker} ({state})>"


def _invoke(fn: Callable[[PendingRequest[_R]], object], request: PendingRequest[_R]) -> None:
    try:
        fn(request)
    except Exception:
        log.exception("done callback %r of %r raised", fn, request)
