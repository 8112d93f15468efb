"""The next-generation consumer group protocol's messages (KIP-848).

The same declarative style as ``messages``: each class mirrors
``clients/src/main/resources/common/message/<Name>.json`` in apache/kafka (Kafka 4.0),
field order is wire order, names are the spec's in snake_case, version ranges are
spelled as in the spec.

- ConsumerGroupHeartbeat (API 68), v0-1, flexible from v0. v1 adds
  ``SubscribedTopicRegex`` (KIP-848's broker-side regular expressions). The response's
  ``Assignment`` is a nullable struct: null when the target assignment did not change.

In a heartbeat request, every nullable field means "unchanged since the last
heartbeat" when null (and ``rebalance_timeout_ms`` when -1); the member sends them in
full when it joins (epoch 0) and after a failed heartbeat. Topics are named by topic id
in both directions; Metadata v10+ maps ids to names.

OffsetCommit/OffsetFetch take the member epoch where the classic protocol takes the
generation: they are the classes in ``messages``.

Imports only the standard library, attrs and the ``_protocol`` siblings.
"""

from __future__ import annotations

import uuid

import attrs

from .._errors import ConfigurationError
from ._schema import ZERO_UUID, Request, Response, Struct, kf

__all__ = [
    "GROUP_REQUESTS",
    "GROUP_RESPONSES",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ConsumerGroupHeartbeatAssignment",
    "ConsumerGroupHeartbeatQuery",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatRequestTopicPartitions",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupHeartbeatTopicPartitions",
]

#: The member epoch that joins the group (and rejoins after fencing).
JOIN_EPOCH = 0
#: The member epoch that leaves the group for good.
LEAVE_EPOCH = -1
#: The member epoch with which a static member leaves, expecting to come back (KIP-848).
STATIC_LEAVE_EPOCH = -2


# ---------------------------------------------------------------- ConsumerGroupHeartbeat (68)


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatRequestTopicPartitions(Struct):
    """Partitions the member owns in one topic (spec type ``TopicPartitions``)."""

    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("0+", "uuid"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatRequest(Request):
    """ConsumerGroupHeartbeatRequest (key 68)."""

    API_KEY = 68
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = 0

    group_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    member_id: str = attrs.field(default="", metadata=kf("0+", "string"))
    member_epoch: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    instance_id: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))
    rack_id: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))
    rebalance_timeout_ms: int = attrs.field(default=-1, metadata=kf("0+", "int32"))
    subscribed_topic_names: tuple[str, ...] | None = attrs.field(
        default=None, metadata=kf("0+", "[]string", nullable="0+")
    )
    subscribed_topic_regex: str | None = attrs.field(
        default=None, metadata=kf("1+", "string", nullable="1+")
    )
    server_assignor: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    topic_partitions: tuple[ConsumerGroupHeartbeatRequestTopicPartitions, ...] | None = attrs.field(
        default=None,
        metadata=kf("0+", ConsumerGroupHeartbeatRequestTopicPartitions, array=True, nullable="0+"),
    )


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatTopicPartitions(Struct):
    """Partitions assigned in one topic (the response's common struct ``TopicPartitions``)."""

    topic_id: uuid.UUID = attrs.field(default=ZERO_UUID, metadata=kf("0+", "uuid"))
    partitions: tuple[int, ...] = attrs.field(default=(), metadata=kf("0+", "[]int32"))


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatAssignment(Struct):
    """The member's target assignment (spec type ``Assignment``)."""

    topic_partitions: tuple[ConsumerGroupHeartbeatTopicPartitions, ...] = attrs.field(
        default=(), metadata=kf("0+", ConsumerGroupHeartbeatTopicPartitions, array=True)
    )


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatResponse(Response):
    """ConsumerGroupHeartbeatResponse (key 68)."""

    API_KEY = 68
    MIN_VERSION = 0
    MAX_VERSION = 1
    FLEXIBLE_VERSION = 0

    throttle_time_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    error_code: int = attrs.field(default=0, metadata=kf("0+", "int16"))
    error_message: str | None = attrs.field(
        default=None, metadata=kf("0+", "string", nullable="0+")
    )
    member_id: str | None = attrs.field(default=None, metadata=kf("0+", "string", nullable="0+"))
    member_epoch: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    heartbeat_interval_ms: int = attrs.field(default=0, metadata=kf("0+", "int32"))
    assignment: ConsumerGroupHeartbeatAssignment | None = attrs.field(
        default=None, metadata=kf("0+", ConsumerGroupHeartbeatAssignment, nullable="0+")
    )


ConsumerGroupHeartbeatRequest.RESPONSE_TYPE = ConsumerGroupHeartbeatResponse


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatQuery:
    """A heartbeat to write once the negotiated version is known (a
    ``queries.Query``). From v1, a heartbeat that sends topic names sends an empty
    ``SubscribedTopicRegex`` with them: the names replace any regex. librdkafka sends
    this, and its mock coordinator requires names and regex to be both null or both
    set (docs/testing.md)."""

    request: ConsumerGroupHeartbeatRequest

    @property
    def api(self) -> type[Request]:
        return ConsumerGroupHeartbeatRequest

    def build(self, version: int) -> ConsumerGroupHeartbeatRequest:
        """``ConfigurationError`` for a regex at v0: a broker without v1 (before Kafka
        4.0) cannot match one, and dropping it would subscribe to nothing."""
        request = self.request
        if version < 1 and request.subscribed_topic_regex:
            raise ConfigurationError(
                f"the broker does not match regular expressions (it speaks "
                f"ConsumerGroupHeartbeat v{version}; v1, Kafka 4.0+, is needed): subscribe "
                f"with a compiled re.Pattern to match topic names in the client"
            )
        if version < 1:
            return attrs.evolve(request, subscribed_topic_regex=None)
        if (
            version >= 1
            and request.subscribed_topic_names is not None
            and request.subscribed_topic_regex is None
        ):
            return attrs.evolve(request, subscribed_topic_regex="")
        return request


#: Every request class declared here, by API key.
GROUP_REQUESTS: dict[int, type[Request]] = {
    ConsumerGroupHeartbeatRequest.API_KEY: ConsumerGroupHeartbeatRequest,
}

#: Every response class declared here, by API key.
GROUP_RESPONSES: dict[int, type[Response]] = {
    key: cls.RESPONSE_TYPE for key, cls in GROUP_REQUESTS.items()
}
