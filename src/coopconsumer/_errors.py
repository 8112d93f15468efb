"""The public exception hierarchy.

A leaf module: it imports nothing from the package, so every layer (``_protocol``
included) may raise these.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AssignorError",
    "AuthenticationError",
    "BrokerConnectionError",
    "CommitFailedError",
    "ConfigurationError",
    "CoopConsumerError",
    "DeliveryError",
    "IllegalStateError",
    "IncompatibleVersionError",
    "InvalidAssignmentError",
    "KafkaError",
    "ProducerFencedError",
    "ProtocolError",
    "RebalanceInProgressError",
    "RequestTimeoutError",
    "TransactionAbortedError",
    "TransactionError",
]


class CoopConsumerError(Exception):
    """Base class of every error this library raises."""

    #: Whether retrying the same operation later may succeed.
    retriable: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        # Most subclasses take keyword-only arguments, which BaseException's default
        # reduce (cls(*args)) would drop; rebuild from args and the instance attributes so
        # errors cross process boundaries (multiprocessing, Spark's cloudpickle) intact.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(
    cls: type[CoopConsumerError], args: tuple[Any, ...], state: dict[str, Any]
) -> CoopConsumerError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigurationError(CoopConsumerError, ValueError):
    """A configuration key, value or plugin (assignor, listener) is invalid.

    Raised at construction; nothing has been started when it is raised.
    """


class ProtocolError(CoopConsumerError):
    """Bytes that do not parse as the message they claim to be.

    ``member_id`` names the group member whose metadata was malformed when known;
    ``api_key``/``api_version``/``broker`` name the request when the bytes came from a
    broker.
    """

    def __init__(
        self,
        message: str,
        *,
        member_id: str | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
        broker: str | None = None,
    ) -> None:
        context = []
        if member_id is not None:
            context.append(f"member {member_id!r}")
        if api_key is not None:
            context.append(f"api_key={api_key}")
        if api_version is not None:
            context.append(f"version={api_version}")
        if broker is not None:
            context.append(f"broker {broker}")
        full = f"{message} ({', '.join(context)})" if context else message
        super().__init__(full)
        self.member_id = member_id
        self.api_key = api_key
        self.api_version = api_version
        self.broker = broker


class KafkaError(CoopConsumerError):
    """A broker answered with a non-zero error code.

    ``code``/``name``/``retriable`` come from Kafka's error table; ``api_key``,
    ``api_version`` and ``broker`` say which request got the answer.
    """

    def __init__(
        self,
        code: int,
        name: str,
        *,
        retriable: bool = False,
        description: str = "",
        api_key: int | None = None,
        api_version: int | None = None,
        broker: str | None = None,
        message: str | None = None,
    ) -> None:
        parts = [f"{name} ({code})"]
        if description:
            parts.append(description)
        if message:
            parts.append(message)
        where = []
        if api_key is not None:
            where.append(f"api_key={api_key}")
        if api_version is not None:
            where.append(f"version={api_version}")
        if broker is not None:
            where.append(f"broker {broker}")
        text = ": ".join(parts)
        if where:
            text += f" [{', '.join(where)}]"
        super().__init__(text)
        self.code = code
        self.name = name
        self.retriable = retriable
        self.description = description
        self.api_key = api_key
        self.api_version = api_version
        self.broker = broker


class BrokerConnectionError(CoopConsumerError, ConnectionError):
    """A broker could not be reached, or closed the connection mid-request."""

    retriable = True

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(f"{message} (broker {broker})" if broker else message)
        self.broker = broker
        #: The message without the broker's name (for errors that wrap this one).
        self.reason = message


class RequestTimeoutError(CoopConsumerError, TimeoutError):
    """A request got no answer within its timeout. The connection was closed."""

    retriable = True

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        broker: str | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.broker = broker


class AuthenticationError(CoopConsumerError):
    """A broker connection could not be secured or authenticated.

    Raised when the TLS handshake fails (a certificate that does not verify, a hostname
    that does not match, an expired certificate, no common protocol) or SASL
    authentication is refused (wrong credentials, a mechanism the broker does not
    enable, a server that cannot prove it knows the password). ``broker`` names the
    broker, ``mechanism`` the SASL mechanism (or ``"SSL"`` for the TLS handshake),
    ``broker_message`` the broker's own error message when it sent one, ``error_code``
    Kafka's error code when the broker answered with one, and ``enabled_mechanisms``
    what the broker offers when the mechanism was refused.

    Not retriable: retrying with the same credentials fails the same way, so the
    client does not loop. A consumer whose connections cannot authenticate raises it
    from ``poll()`` and is unusable afterwards; close it and fix the configuration.
    The message never contains a password, key or token.
    """

    def __init__(
        self,
        message: str,
        *,
        broker: str | None = None,
        mechanism: str | None = None,
        broker_message: str | None = None,
        error_code: int | None = None,
        enabled_mechanisms: tuple[str, ...] = (),
    ) -> None:
        if mechanism == "SSL":
            what = "TLS"
        else:
            what = f"{mechanism} authentication" if mechanism else "authentication"
        where = f" with broker {broker}" if broker else ""
        text = f"{what} failed{where}: {message}"
        if broker_message:
            text += f" (broker says: {broker_message})"
        super().__init__(text)
        self.broker = broker
        self.mechanism = mechanism
        self.broker_message = broker_message
        self.error_code = error_code
        self.enabled_mechanisms = tuple(enabled_mechanisms)


class AssignorError(CoopConsumerError):
    """A partition assignor raised, or returned something unusable."""


class InvalidAssignmentError(AssignorError):
    """An assignment breaks a rule of the rebalance protocol in use.

    Under COOPERATIVE, a partition may not be revoked from one member and added to
    another in the same rebalance (KIP-429).
    """


class RebalanceInProgressError(CoopConsumerError):
    """The group is rebalancing; retry the operation after the next ``poll()``."""

    retriable = True


class CommitFailedError(CoopConsumerError):
    """The commit cannot succeed: the member's generation is gone.

    The partitions were (or will be) reassigned; their records may be processed by
    another member. The consumer stays usable and rejoins on the next ``poll()``.
    """


class IllegalStateError(CoopConsumerError):
    """The call is not allowed in the consumer's current mode: ``subscribe()`` while
    partitions are assigned manually, or ``assign()``/``unassign()`` (and the
    incremental forms) while subscribed (Java's ``IllegalStateException``: "Subscription
    to topics, partitions and pattern are mutually exclusive"). Nothing changed;
    ``unsubscribe()`` (or ``unassign()``) returns the consumer to neither mode.
    """


class DeliveryError(CoopConsumerError):
    """A produced record was not acknowledged by the broker.

    Raised by the Kafka writers (``coopconsumer.spark``) once every outstanding delivery
    has been waited for. ``topic``/``partition`` name the first failed record's
    destination (``partition`` is -1 when it was never assigned one, e.g. the broker was
    unreachable); ``code``/``name`` are Kafka's (or librdkafka's) error; ``failed`` counts
    every record that failed in the same flush.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        code: int,
        name: str,
        retriable: bool = False,
        failed: int = 1,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.code = code
        self.name = name
        self.retriable = retriable
        self.failed = failed


class TransactionError(CoopConsumerError):
    """A Kafka transaction failed.

    ``fatal`` says whether the transactional producer is unusable: then the
    :class:`~coopconsumer.TransactionalProcessor` is stopped and must be closed.
    ``code``/``name`` are Kafka's (or librdkafka's) error when one caused it.
    """

    def __init__(
        self,
        message: str,
        *,
        fatal: bool = False,
        code: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(message)
        self.fatal = fatal
        self.code = code
        self.name = name


class TransactionAbortedError(TransactionError):
    """The open transaction had to be aborted: nothing it wrote becomes visible to
    ``read_committed`` readers, the offsets sent with it are discarded, and its input
    records are processed again.

    ``reason`` is a short label (``"group generation fenced"``, ``"delivery
    failed"``, ...). ``permanent`` is True when replaying the same input would fail
    the same way (a record too large, a topic that does not exist): the
    :class:`~coopconsumer.TransactionalProcessor` raises only those, and replays the
    others itself.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        permanent: bool = False,
        code: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(message, fatal=False, code=code, name=name)
        self.reason = reason
        self.permanent = permanent


class ProducerFencedError(TransactionError):
    """The transactional producer was fenced: another producer started with the same
    ``transactional.id`` (two processes were given one id, or a restarted process
    replaced this one), or the transaction coordinator bumped its epoch. Always fatal:
    the open transaction is aborted by the coordinator and this process must stop.
    """

    def __init__(self, message: str, *, code: int | None = None, name: str | None = None) -> None:
        super().__init__(message, fatal=True, code=code, name=name)


class IncompatibleVersionError(CoopConsumerError):
    """A broker or the installed confluent-kafka lacks what a feature needs (e.g. a
    broker without TxnOffsetCommit v3 cannot fence transactional commits by generation,
    KIP-447; a confluent-kafka whose consumer group metadata format differs from the one
    coopconsumer writes). The message names the component and its version. Nothing was
    sent when it is raised."""
