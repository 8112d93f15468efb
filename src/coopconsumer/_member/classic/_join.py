"""The join phase: PREPARING_JOIN, JOINING and LEADER_AWAITING_METADATA.

From "a (re)join is due" to a SyncGroup sent: the pre-join listeners (KIP-429 1.1-1.4),
JoinGroup with the same subscription for every assignor (KIP-394 member ids, KIP-800
reasons), its errors, and the leader's assignment (KIP-814 ``skip_assignment``
included). Handlers take the ``MemberCore`` and an input; ``_table.py`` says which
state and input each serves and where it may move the member.

Pure: imports the core, messages, assignors; never I/O, threads or clocks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from ... import consumer_protocol
from ..._errors import AssignorError, CoopConsumerError, ProtocolError
from ..._protocol import error_codes
from ..._protocol.messages import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from ...assignors._api import (
    ClusterMetadata,
    ConsumerPartitionAssignor,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
)
from ...assignors._validation import check_assignment, validate_cooperative_assignment
from .._base import ms
from .._diff import revoke_before_join
from .._effects import Observation, ReportError
from .._error_actions import Api, ErrorAction, action_for
from .._inputs import ListenerDone
from .._metadata import want_metadata
from .._outcomes import JoinGroupOutcome
from ._core import COOPERATIVE_STICKY, LEADER_SYNC_DELAY_S, PROTOCOL_TYPE, MemberCore
from ._states import MemberState


def enter_prepare(m: MemberCore, reason: str, now: float) -> None:
    if m.rebalance_started_at is None:
        m.rebalance_started_at = now
        m.observe(Observation.REBALANCE_STARTED, now)
    m.cancel(Api.JOIN_GROUP, Api.SYNC_GROUP)
    m.reason = reason
    m.log(logging.INFO, f"(re)joining group {m.config.group_id!r}: {reason}")
    m.enter(MemberState.PREPARING_JOIN)
    m.ensure_coordinator_if_unknown(now)
    prepare_step(m, now)


def prepare_step(m: MemberCore, now: float) -> None:
    """Pre-join listeners (KIP-429 1.1-1.4), then JoinGroup once all are done."""
    if not m.has_generation():
        m.lose()
    if m.listeners:
        return
    if m.has_generation():
        to_revoke = revoke_before_join(m.protocol, m.owned, m.subscribed)
        if to_revoke:
            m.revoke(to_revoke)
            return
    m.cancel(Api.HEARTBEAT)
    m.enter(MemberState.JOINING)
    m.join_retry_at = None
    maybe_send_join(m, now)


def prepare_listener_done(m: MemberCore, event: ListenerDone, now: float) -> None:
    prepare_step(m, now)


def subscription_for(m: MemberCore, assignor: ConsumerPartitionAssignor) -> Subscription:
    """The member's Subscription for ``assignor``.

    ``generation_id`` is the generation of the owned partitions (of the last
    assignment applied), as librdkafka sends it (its sticky assignors' state
    generation, set in ``on_assignment``), not the generation of the last JoinGroup
    answer as Java's ``ConsumerCoordinator.metadata()`` does. The two differ only
    after a JoinGroup whose SyncGroup failed (REBALANCE_IN_PROGRESS, a lost
    connection): nothing was applied, so the member rejoins with byte-identical
    metadata, which a coordinator answers with its current generation instead of
    starting another rebalance (Kafka's GroupCoordinator ``member.matches``; Tansu
    likewise). Java's value would change the metadata and restart the rebalance on
    every failed sync. The lower value is also the truthful one for the leader's
    cooperative-sticky assignor, which ranks conflicting ownership claims by it.
    """
    topics = tuple(sorted(m.subscribed))
    return Subscription(
        topics=topics,
        user_data=assignor.subscription_user_data(m.subscribed),
        owned_partitions=tuple(sorted(m.owned)),
        generation_id=m.assigned_generation_id,
        rack_id=m.config.client_rack,
    )


def maybe_send_join(m: MemberCore, now: float) -> None:
    if m.in_flight(Api.JOIN_GROUP):
        return
    if m.coordinator_id is None:
        m.ensure_coordinator(now)
        return
    if m.join_retry_at is not None and now < m.join_retry_at:
        return
    m.join_retry_at = None
    # One protocol per assignor, in preference order; only user_data differs.
    protocols = tuple(
        JoinGroupRequestProtocol(
            name=a.name,
            metadata=consumer_protocol.encode_subscription(subscription_for(m, a)),
        )
        for a in m.assignors
    )
    m.joined_subscription = m.subscribed
    if m.join_started_counts is None and m.metadata is not None:
        m.join_started_counts = dict(m.metadata.partition_counts)
    m.send(
        Api.JOIN_GROUP,
        JoinGroupRequest(
            group_id=m.config.group_id,
            session_timeout_ms=m.config.session_timeout_ms,
            rebalance_timeout_ms=m.config.max_poll_interval_ms,
            member_id=m.member_id,
            group_instance_id=m.config.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=protocols,
            reason=m.reason or None,
        ),
        now,
    )


def join_outcome(m: MemberCore, event: JoinGroupOutcome, now: float) -> None:
    if event.error is not None or event.response is None:
        m.rebalance_failed(now)
        m.coordinator_dead(f"JoinGroup failed: {event.error}", now)
        return
    response = event.response
    code = response.error_code
    if code != error_codes.NONE:
        m.rebalance_failed(now)
        join_error(m, code, response, now)
        return
    if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
        m.fatal(m.inconsistent(Api.JOIN_GROUP, response.protocol_type), now)
        return
    # Java's JoinGroup handler records join-latency for error NONE with a consistent
    # protocol type, before anything looks at the chosen protocol.
    m.observe(Observation.JOIN_COMPLETED, now, now - event.pending.sent_at)
    name = response.protocol_name
    if name is None or name not in m.assignor_by_name:
        m.fatal(m.inconsistent(Api.JOIN_GROUP, f"protocol {name!r}"), now)
        return
    join_started_counts, m.join_started_counts = m.join_started_counts, None
    m.member_id = response.member_id
    m.generation_id = response.generation_id
    m.protocol_name = name
    m.leader_id = response.leader
    m.session_ok_at = now
    m.heartbeat_due = now + ms(m.config.heartbeat_interval_ms)
    if response.leader == response.member_id:
        if response.skip_assignment:
            skip_assignment(m, response, join_started_counts, now)
            return
        m.leader_members = response.members
        # No follower to let go first in a group of one.
        alone = all(member.member_id == m.member_id for member in response.members)
        m.leader_sync_at = now if alone else now + LEADER_SYNC_DELAY_S
        m.leader_assignments = None
        leader_assign(m, now, metadata_refreshed=False)
        return
    m.assignment_snapshot = None
    m.snapshot_unknown = frozenset()
    send_sync(m, (), now)


def skip_assignment(
    m: MemberCore,
    response: JoinGroupResponse,
    join_started_counts: dict[str, int] | None,
    now: float,
) -> None:
    """KIP-814: a static leader rejoining a stable group must not reassign; it syncs
    with nothing and keeps watching the group's metadata.

    Java snapshots the metadata it holds now (``assignmentSnapshot =
    metadataSnapshot``), which hides a change that landed after this member
    started joining: the group's assignment predates it, yet current and snapshot
    agree, so no leader ever assigns the new partitions (KAFKA-13435's symptom, left
    open for changes during a retried join). The snapshot is therefore, in order of
    preference: the one of the assignment this member itself made before its
    reset; else the counts as this member first sent JoinGroup in this join; else
    (no metadata then) the current ones. Any change since then makes it rejoin.
    What remains unseen, as in Java, is a change made before this process started
    (the protocol carries no record of what the standing assignment came from); the
    group's next rebalance assigns it.
    """
    # The broker sends the leader the members' metadata (GroupCoordinator's
    # updateStaticMemberAndRebalance); Java watches the whole group subscription.
    group_topics = m.subscribed
    if response.members:
        try:
            subscriptions = decode_members(response.members)
        except ProtocolError as exc:
            assignment_failed(m, exc, now)
            return
        group_topics = group_topics | frozenset(
            t for sub in subscriptions.values() for t in sub.topics
        )
    m.group_topics = group_topics
    if m.assignment_snapshot is None:
        if join_started_counts is None:
            md = m.metadata
            join_started_counts = dict(md.partition_counts) if md is not None else {}
        # Topics only other members subscribe to are usually not fetched yet; their
        # absence says nothing, so they are not counted as changed when they appear.
        m.snapshot_unknown = group_topics - frozenset(join_started_counts)
        m.assignment_snapshot = {
            t: join_started_counts[t] for t in group_topics if t in join_started_counts
        }
    send_sync(m, (), now)


def join_error(m: MemberCore, code: int, response: JoinGroupResponse, now: float) -> None:
    action = action_for(Api.JOIN_GROUP, code)
    name = error_codes.info(code).name
    if action is ErrorAction.MEMBER_ID_REQUIRED:
        # KIP-394: the coordinator issued our id; rejoin with it right away.
        m.member_id = response.member_id
        m.reason = "the coordinator requires a member id (MEMBER_ID_REQUIRED)"
        maybe_send_join(m, now)
    elif action is ErrorAction.RESET_AND_REJOIN:
        m.reset_generation(clear_member_id=code == error_codes.UNKNOWN_MEMBER_ID)
        enter_prepare(m, f"encountered {name} from JoinGroup", now)
    elif action is ErrorAction.REJOIN:
        m.reason = f"encountered {name} from JoinGroup"
        maybe_send_join(m, now)
    elif action is ErrorAction.FIND_COORDINATOR:
        # The next JoinGroup waits retry.backoff.ms (Java's joinGroupIfNeeded), also when
        # the lookup names a coordinator at once: a moving coordinator answers
        # NOT_COORDINATOR to every JoinGroup until the move completes.
        m.join_retry_at = now + ms(m.config.retry_backoff_ms)
        m.coordinator_dead(f"{name} from JoinGroup", now)
    elif action is ErrorAction.FATAL:
        m.fatal(m.kafka_error(code, Api.JOIN_GROUP), now)
    else:
        if action is ErrorAction.REPORT_AND_REJOIN:
            m.emit(ReportError(error=m.kafka_error(code, Api.JOIN_GROUP)))
            m.reason = f"rebalance failed: unexpected {name} from JoinGroup"
        # RETRY (and anything else a JoinGroup can only retry): after the backoff.
        m.join_retry_at = now + ms(m.config.retry_backoff_ms)


def leader_assign(m: MemberCore, now: float, *, metadata_refreshed: bool) -> None:
    name = m.protocol_name
    assert name is not None
    assignor = m.assignor_by_name[name]
    try:
        subscriptions = decode_members(m.leader_members)
    except ProtocolError as exc:
        assignment_failed(m, exc, now)
        return
    group_topics = frozenset(t for s in subscriptions.values() for t in s.topics)
    m.group_topics = group_topics
    known = m.metadata.partition_counts if m.metadata is not None else {}
    missing = group_topics - frozenset(known)
    followers = any(member.member_id != m.member_id for member in m.leader_members)
    if not metadata_refreshed and (missing or followers):
        # A leader with followers assigns from fresh metadata of the whole group
        # subscription, as librdkafka's leader always does, while it waits
        # LEADER_SYNC_DELAY_S for them to sync first; alone, it refreshes only for
        # topics it has no metadata for, as Java's does (docs/testing.md, issue 24).
        m.enter(MemberState.LEADER_AWAITING_METADATA)
        want_metadata(m, group_topics | m.subscribed, now, fresh=followers)
        return
    metadata = m.metadata or ClusterMetadata(partition_counts={})
    group_subscription = GroupSubscription(subscriptions=subscriptions)
    try:
        result = assignor.assign(metadata, group_subscription)
    except Exception as exc:  # an assignor is user code: any exception is its error
        error = AssignorError(f"assignor {name!r} raised {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        assignment_failed(m, error, now)
        return
    try:
        check_assignment(metadata, group_subscription, result, assignor_name=name)
        if m.protocol is RebalanceProtocol.COOPERATIVE and name != COOPERATIVE_STICKY:
            validate_cooperative_assignment(group_subscription, result, assignor_name=name)
    except AssignorError as exc:
        assignment_failed(m, exc, now)
        return
    assignments = tuple(
        SyncGroupRequestAssignment(
            member_id=member_id,
            assignment=consumer_protocol.encode_assignment(result.assignments[member_id]),
        )
        for member_id in sorted(subscriptions)
    )
    m.assignment_snapshot = m.metadata_snapshot(group_topics)
    m.snapshot_unknown = frozenset()
    m.leader_assignments = assignments
    send_leader_sync(m, now)


def send_leader_sync(m: MemberCore, now: float) -> None:
    """The leader's SyncGroup, once its assignment is computed and ``leader_sync_at``
    has come (``LEADER_SYNC_DELAY_S``)."""
    assignments = m.leader_assignments
    if assignments is None or now < m.leader_sync_at:
        return
    m.leader_assignments = None
    send_sync(m, assignments, now)


def decode_members(members: Sequence[JoinGroupResponseMember]) -> dict[str, Subscription]:
    decoded: dict[str, Subscription] = {}
    for member in members:
        try:
            subscription = consumer_protocol.decode_subscription(
                member.metadata, member_id=member.member_id
            )
        except ProtocolError:
            raise
        except Exception as exc:  # a codec bug must still name the member
            raise ProtocolError(
                f"malformed subscription metadata: {exc}", member_id=member.member_id
            ) from exc
        decoded[member.member_id] = attrs.evolve(
            subscription, group_instance_id=member.group_instance_id
        )
    return decoded


def assignment_failed(m: MemberCore, error: CoopConsumerError, now: float) -> None:
    """The leader cannot produce a valid assignment: report it from poll() (Java
    raises it from poll()) and rejoin after a backoff; nothing owned changes."""
    m.rebalance_failed(now)
    m.emit(ReportError(error=error))
    m.cancel(Api.HEARTBEAT)
    m.enter(MemberState.JOINING)
    m.reason = f"the leader's assignment failed: {error}"
    m.log(logging.ERROR, m.reason)
    m.join_retry_at = now + ms(m.config.retry_backoff_ms)
    maybe_send_join(m, now)


def send_sync(
    m: MemberCore, assignments: tuple[SyncGroupRequestAssignment, ...], now: float
) -> None:
    m.cancel(Api.HEARTBEAT)
    if m.coordinator_id is None:
        # No coordinator to sync with: rejoin once it is found.
        m.enter(MemberState.JOINING)
        m.ensure_coordinator(now)
        return
    m.enter(MemberState.AWAITING_SYNC)
    m.send(
        Api.SYNC_GROUP,
        SyncGroupRequest(
            group_id=m.config.group_id,
            generation_id=m.generation_id,
            member_id=m.member_id,
            group_instance_id=m.config.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=m.protocol_name,
            assignments=assignments,
        ),
        now,
    )


def rejoin_now(m: MemberCore, reason: str, now: float, *, backoff: bool = False) -> None:
    """Back to JoinGroup keeping generation and ownership (no pre-join listeners:
    nothing was applied since the last join), at once or after the retry backoff."""
    m.cancel(Api.JOIN_GROUP, Api.SYNC_GROUP, Api.HEARTBEAT)
    m.enter(MemberState.JOINING)
    m.reason = reason
    m.join_retry_at = now + ms(m.config.retry_backoff_ms) if backoff else None
    maybe_send_join(m, now)
