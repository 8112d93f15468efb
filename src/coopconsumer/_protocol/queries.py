"""Requests whose layout changes with the version, as version-free queries.

FindCoordinator (a single ``key`` up to v3, a batch of ``coordinator_keys`` from v4,
KIP-699), OffsetFetch (one group up to v7, a batch of ``groups`` from v8, KIP-709),
Metadata ("all topics" is ``[]`` at v0 and null later; topic creation is a v4 field)
and ListOffsets (the isolation level is a v2 field) cannot be written before the
connection's version is known. A query is a frozen value
the group member can put in an effect; ``build(version)`` writes the request at the
version the wire client negotiated, and one reader per message turns an answer of any
version back into plain values. Both the group member and the wire client's blocking
helpers use these, so each message is written and read in one place. For simple
callers (tools, tests, admin code), ``raise_for_error`` raises an answer's top-level
error code and ``find_coordinator_request`` writes a lookup at a known version.

Pure: imports only the messages and the error table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final, Protocol

import attrs

from .._errors import ConfigurationError
from . import error_codes
from ._schema import Request, Response
from .messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    MetadataRequest,
    MetadataRequestTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

__all__ = [
    "EARLIEST_TIMESTAMP",
    "GROUP_KEY_TYPE",
    "LATEST_TIMESTAMP",
    "CommittedOffset",
    "CoordinatorAnswer",
    "FindCoordinatorQuery",
    "ListOffsetsQuery",
    "MetadataQuery",
    "OffsetFetchAnswer",
    "OffsetFetchQuery",
    "Query",
    "coordinator_answer",
    "find_coordinator_request",
    "list_offsets_answer",
    "offset_fetch_answer",
    "raise_for_error",
]

#: FindCoordinator key type of a consumer group.
GROUP_KEY_TYPE: Final = 0
#: OffsetFetch's first version with ``require_stable`` (KIP-447).
_REQUIRE_STABLE_VERSION: Final = 7


class Query(Protocol):
    """A request to write once the negotiated version is known."""

    @property
    def api(self) -> type[Request]:
        """The request class ``build`` returns (for version negotiation)."""
        ...

    def build(self, version: int) -> Request:
        """The request at ``version``."""
        ...


# ---------------------------------------------------------------------- FindCoordinator


@attrs.frozen(kw_only=True)
class FindCoordinatorQuery:
    """Look up the coordinator of ``key`` (a group id for ``key_type`` 0)."""

    key: str
    key_type: int = GROUP_KEY_TYPE

    @property
    def api(self) -> type[Request]:
        return FindCoordinatorRequest

    def build(self, version: int) -> FindCoordinatorRequest:
        """v4+ carries a batch of ``coordinator_keys`` (KIP-699); v0-3 a single ``key``
        (``key_type`` exists from v1; v0 only knows groups: ``ConfigurationError``)."""
        if version >= 4:
            return FindCoordinatorRequest(key_type=self.key_type, coordinator_keys=(self.key,))
        if version >= 1:
            return FindCoordinatorRequest(key=self.key, key_type=self.key_type)
        if self.key_type != GROUP_KEY_TYPE:
            raise ConfigurationError("FindCoordinator v0 can only look up group coordinators")
        return FindCoordinatorRequest(key=self.key)


@attrs.frozen(kw_only=True)
class CoordinatorAnswer:
    """One key's answer from FindCoordinator, whichever version carried it."""

    key: str
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


def coordinator_answer(
    response: FindCoordinatorResponse, key: str, api_version: int
) -> CoordinatorAnswer:
    """``key``'s answer in a FindCoordinator response of ``api_version``.

    A v4+ answer that lacks ``key`` reads as UNKNOWN_SERVER_ERROR (the broker broke
    the protocol; retrying elsewhere is the only sensible reaction).
    """
    if api_version >= 4:
        entry = next((c for c in response.coordinators if c.key == key), None)
        if entry is None:
            return CoordinatorAnswer(
                key=key,
                error_code=error_codes.UNKNOWN_SERVER_ERROR,
                error_message=f"FindCoordinator answer lacks key {key!r}",
                node_id=-1,
                host="",
                port=-1,
            )
        return CoordinatorAnswer(
            key=key,
            error_code=entry.error_code,
            error_message=entry.error_message,
            node_id=entry.node_id,
            host=entry.host,
            port=entry.port,
        )
    return CoordinatorAnswer(
        key=key,
        error_code=response.error_code,
        error_message=response.error_message,
        node_id=response.node_id,
        host=response.host,
        port=response.port,
    )


# ---------------------------------------------------------------------- OffsetFetch


def _topic_partitions(
    values: Mapping[str, tuple[int, ...]],
) -> Mapping[str, tuple[int, ...]]:
    return MappingProxyType({t: tuple(sorted(ps)) for t, ps in sorted(values.items())})


@attrs.frozen(kw_only=True)
class OffsetFetchQuery:
    """The committed offsets of ``partitions`` (topic -> partition indexes) of
    ``group_id``. ``require_stable`` (KIP-447, v7+) asks the coordinator to answer
    UNSTABLE_OFFSET_COMMIT while a transaction holds offsets of a partition; a broker
    older than v7 cannot, and the flag is dropped there (as Java's consumer does)."""

    group_id: str
    partitions: Mapping[str, tuple[int, ...]] = attrs.field(converter=_topic_partitions)
    require_stable: bool = False

    @property
    def api(self) -> type[Request]:
        return OffsetFetchRequest

    def build(self, version: int) -> OffsetFetchRequest:
        stable = self.require_stable and version >= _REQUIRE_STABLE_VERSION
        if version >= 8:
            return OffsetFetchRequest(
                groups=(
                    OffsetFetchRequestGroup(
                        group_id=self.group_id,
                        topics=tuple(
                            OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in self.partitions.items()
                        ),
                    ),
                ),
                require_stable=stable,
            )
        return OffsetFetchRequest(
            group_id=self.group_id,
            topics=tuple(
                OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                for t, ps in self.partitions.items()
            ),
            require_stable=stable,
        )


@attrs.frozen(kw_only=True)
class CommittedOffset:
    """One partition's row of an OffsetFetch answer (offset -1: nothing committed)."""

    offset: int
    leader_epoch: int
    metadata: str | None
    error_code: int


def _rows(
    values: Mapping[tuple[str, int], CommittedOffset],
) -> Mapping[tuple[str, int], CommittedOffset]:
    return MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class OffsetFetchAnswer:
    """An OffsetFetch answer of any version: the group's error code and a row per
    ``(topic, partition)`` the broker answered for."""

    error_code: int
    partitions: Mapping[tuple[str, int], CommittedOffset] = attrs.field(converter=_rows)


def offset_fetch_answer(
    response: OffsetFetchResponse, group_id: str, api_version: int
) -> OffsetFetchAnswer:
    """Read ``group_id``'s part of an OffsetFetch response of ``api_version`` (v8+
    answers per group; a v8+ answer without the group has no rows and no error)."""
    topics: Sequence[OffsetFetchResponseTopics | OffsetFetchResponseTopic]
    if api_version >= 8:
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None and len(response.groups) == 1:
            group = response.groups[0]  # brokers that do not echo the id
        if group is None:
            return OffsetFetchAnswer(error_code=error_codes.NONE, partitions={})
        code, topics = group.error_code, group.topics
    else:
        code, topics = response.error_code, response.topics
    rows = {
        (topic.name, p.partition_index): CommittedOffset(
            offset=p.committed_offset,
            leader_epoch=p.committed_leader_epoch,
            metadata=p.metadata,
            error_code=p.error_code,
        )
        for topic in topics
        for p in topic.partitions
    }
    return OffsetFetchAnswer(error_code=code, partitions=rows)


# ---------------------------------------------------------------------- Metadata


def _optional_names(values: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(dict.fromkeys(values))


@attrs.frozen(kw_only=True)
class MetadataQuery:
    """Metadata of ``topics`` (None: every topic, for a pattern subscription), in the
    order given, duplicates dropped. ``allow_auto_topic_creation`` (v4+) is off by
    default: subscribing never creates a topic (Java's default). Read the answer with
    ``cluster.ClusterSnapshot.from_response``."""

    topics: tuple[str, ...] | None = attrs.field(converter=_optional_names)
    allow_auto_topic_creation: bool = False

    @property
    def api(self) -> type[Request]:
        return MetadataRequest

    def build(self, version: int) -> MetadataRequest:
        """ "All topics" is an empty array at v0 and null from v1 (KIP-4); v0 cannot
        tell "all" from "none" and is asked for all."""
        wanted: tuple[MetadataRequestTopic, ...] | None
        if self.topics is None:
            wanted = () if version == 0 else None
        else:
            wanted = tuple(MetadataRequestTopic(name=name) for name in self.topics)
        if version >= 4:
            return MetadataRequest(
                topics=wanted, allow_auto_topic_creation=self.allow_auto_topic_creation
            )
        return MetadataRequest(topics=wanted)


# ---------------------------------------------------------------------- ListOffsets

#: ListOffsets timestamps that ask for the log start and the end of a partition (the
#: end is the last stable offset under read_committed).
EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
#: ListOffsets' first version with ``isolation_level``.
_ISOLATION_VERSION: Final = 2


@attrs.frozen(kw_only=True)
class ListOffsetsQuery:
    """The offset at ``timestamp`` (``EARLIEST_TIMESTAMP``, ``LATEST_TIMESTAMP`` or a
    time in ms) of each of ``partitions`` (topic -> partition indexes), all led by the
    broker it is sent to. ``read_committed`` (isolation level 1, v2+) makes the latest
    offset the last stable one; ``list_offsets_answer`` drops every answer of a
    version too old to have been asked for it."""

    partitions: Mapping[str, tuple[int, ...]] = attrs.field(converter=_topic_partitions)
    timestamp: int
    read_committed: bool = False

    @property
    def api(self) -> type[Request]:
        return ListOffsetsRequest

    def build(self, version: int) -> ListOffsetsRequest:
        return ListOffsetsRequest(
            isolation_level=1 if self.read_committed and version >= _ISOLATION_VERSION else 0,
            topics=tuple(
                ListOffsetsTopic(
                    name=topic,
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=p, timestamp=self.timestamp)
                        for p in partitions
                    ),
                )
                for topic, partitions in self.partitions.items()
            ),
        )


def list_offsets_answer(
    response: ListOffsetsResponse, query: ListOffsetsQuery, api_version: int
) -> dict[tuple[str, int], int]:
    """The offset of each ``(topic, partition)`` the broker answered without an error
    (a partition it answered with an error, or with no offset, is left out). Empty when
    ``query`` asked for the last stable offset at a version that cannot say so (v0-1
    would answer the high watermark)."""
    if query.read_committed and api_version < _ISOLATION_VERSION:
        return {}
    return {
        (topic.name, p.partition_index): p.offset
        for topic in response.topics
        for p in topic.partitions
        if p.error_code == error_codes.NONE and p.offset >= 0
    }


def raise_for_error(
    response: Response,
    *,
    api_key: int | None = None,
    version: int | None = None,
    broker: str | None = None,
) -> None:
    """Raise ``KafkaError`` if ``response`` has a top-level ``error_code`` != 0.

    For simple callers (tools, tests); the group state machine maps codes itself.
    Per-partition or per-member codes nested deeper are not inspected.
    """
    code = getattr(response, "error_code", 0)
    if not isinstance(code, int) or code == 0:
        return
    message = getattr(response, "error_message", None)
    raise error_codes.to_exception(
        code,
        api_key=type(response).API_KEY if api_key is None else api_key,
        api_version=version,
        broker=broker,
        message=message if isinstance(message, str) else None,
    )


def find_coordinator_request(
    group_id: str, api_version: int, *, key_type: int = GROUP_KEY_TYPE
) -> FindCoordinatorRequest:
    """The FindCoordinator request for one key at ``api_version`` (see
    ``FindCoordinatorQuery``, which the group member uses too)."""
    return FindCoordinatorQuery(key=group_id, key_type=key_type).build(api_version)
