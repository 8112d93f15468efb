"""The driver's versioned calls: requests whose form depends on the negotiated version.

FindCoordinator, Metadata and OffsetFetch are built (``Query.build``) only once the
chosen node's connection is ready and its ApiVersions answer says which version to
speak; until then ``VersionedCalls`` keeps them, starts connecting, times them out,
and hands each answer (with its version) or failure to the callbacks the driver gave.
Also what the driver needs of the wire client (``ClientLike``) and how a failed
request becomes a typed error (``as_error``).

Runs on the driver's thread (or the asyncio host's loop) only. Imports the wire
protocol and the errors; never the coordinator, ``confluent_kafka`` or the consumer.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._errors import BrokerConnectionError, CoopConsumerError, KafkaError, RequestTimeoutError
from .._protocol import error_codes
from .._protocol._schema import Request
from .._protocol.queries import Query
from ._future import PendingRequest

__all__ = ["ClientLike", "VersionedCalls", "as_error", "describe", "trace"]

#: Group requests sent and answers received, at DEBUG (for diagnosing rebalances).
trace = logging.getLogger("coopconsumer.driver.trace")


def describe(message: object, fields: Sequence[str]) -> str:
    """``field=value`` for each of ``fields`` the message has (trace lines)."""
    return " ".join(f"{f}={getattr(message, f)!r}" for f in fields if hasattr(message, f))


def as_error(exc: BaseException) -> CoopConsumerError:
    """A request's failure as the typed error the member reads."""
    if isinstance(exc, CoopConsumerError):
        return exc
    error = BrokerConnectionError(f"request failed: {exc!r}")
    error.__cause__ = exc
    return error


class ClientLike(Protocol):
    """What the driver needs of ``KafkaClient`` (tests substitute an in-process fake)."""

    def send(
        self,
        node_id: int,
        request: Request,
        *,
        timeout_ms: float | None = None,
        api_version: int | None = None,
    ) -> PendingRequest[Any]: ...

    def poll(self, timeout_s: float) -> None: ...

    def wakeup(self) -> None: ...

    def ready(self, node_id: int) -> bool: ...

    def try_negotiated_version(self, node_id: int, api_key: int | type[Request]) -> int | None: ...

    def least_loaded_node(self) -> int | None: ...

    def add_broker(self, node_id: int, host: str, port: int) -> None: ...

    def add_coordinator(self, node_id: int, host: str, port: int) -> int: ...

    def connection_losses(self, node_id: int) -> int: ...

    def close(self) -> None: ...


class _Call:
    """A request whose form depends on the negotiated version (FindCoordinator,
    Metadata, OffsetFetch): sent once the chosen node's connection is ready."""

    __slots__ = ("api", "build", "deadline", "node", "on_answer", "on_error", "pending")

    def __init__(
        self,
        *,
        api: type[Request],
        node: Callable[[], int | None],
        build: Callable[[int], Request],
        on_answer: Callable[[Any, int], None],
        on_error: Callable[[CoopConsumerError], None],
        deadline: float,
    ) -> None:
        self.api = api
        self.node = node
        self.build = build
        self.on_answer = on_answer
        self.on_error = on_error
        self.deadline = deadline
        self.pending: PendingRequest[Any] | None = None


class VersionedCalls:
    """The versioned calls of one driver: waiting for a ready node, in flight, and
    answered (delivered by :meth:`deliver`, on the driver's turn)."""

    def __init__(self, client: ClientLike, clock: Callable[[], float]) -> None:
        self._client = client
        self._clock = clock
        self._calls: list[_Call] = []
        self._answers: list[tuple[_Call, PendingRequest[Any]]] = []

    @property
    def connecting(self) -> bool:
        """Whether a call waits for its node's connection (the driver polls sooner)."""
        return any(c.pending is None for c in self._calls)

    def add(
        self,
        query: Query,
        node: Callable[[], int | None],
        timeout_s: float,
        on_answer: Callable[[Any, int], None],
        on_error: Callable[[CoopConsumerError], None],
    ) -> None:
        """Send ``query`` to ``node()`` at its negotiated version within ``timeout_s``;
        ``on_answer(response, version)`` or ``on_error(error)`` follows."""
        self._calls.append(
            _Call(
                api=query.api,
                node=node,
                build=query.build,
                on_answer=on_answer,
                on_error=on_error,
                deadline=self._clock() + timeout_s,
            )
        )
        self.step(self._clock())

    def step(self, now: float) -> None:
        """Send the calls whose node is ready; fail those past their deadline."""
        if not self._calls:
            return
        for call in list(self._calls):
            if call.pending is not None:
                continue
            if now >= call.deadline:
                self._calls.remove(call)
                call.on_error(
                    RequestTimeoutError(
                        f"no broker was ready for {call.api.__name__} in time",
                        api_key=call.api.API_KEY,
                    )
                )
                continue
            node = call.node()
            if node is None:
                continue
            try:
                version = self._client.try_negotiated_version(node, call.api)
            except KafkaError as exc:
                if exc.code != error_codes.UNSUPPORTED_VERSION:
                    raise
                # The broker does not speak this API (ConsumerGroupHeartbeat on a
                # broker without KIP-848): the call's answer is that error. Anything
                # else (an AuthenticationError above all) stays fatal to the driver,
                # so that poll() raises it at once.
                self._calls.remove(call)
                call.on_error(exc)
                continue
            if version is None:
                self._client.ready(node)  # starts connecting; asked again next loop
                continue
            request = call.build(version)
            timeout_ms = max(1.0, (call.deadline - now) * 1000.0)
            pending = self._client.send(node, request, timeout_ms=timeout_ms, api_version=version)
            call.pending = pending
            pending.add_done_callback(functools.partial(self._done, call))

    def _done(self, call: _Call, pending: PendingRequest[Any]) -> None:
        if call in self._calls:
            self._calls.remove(call)
        self._answers.append((call, pending))

    def deliver(self) -> None:
        """Hand the answers that arrived since the last turn to their callbacks."""
        answers, self._answers = self._answers, []
        for call, pending in answers:
            error = pending.exception()
            if error is None:
                version = pending.api_version
                call.on_answer(pending.result(), -1 if version is None else version)
            else:
                call.on_error(as_error(error))
