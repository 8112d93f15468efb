"""Transcripts of the transaction proxy's decisions (coopconsumer.testing._txn_core):
request frames in, actions out, Tansu's answers in, client answers out. No sockets.

Frames are written with coopconsumer's codec and the proxy's message classes; the
expected error codes follow Kafka's ``ClassicGroup.validateOffsetCommit``,
``OffsetMetadataManager.fetchOffsets`` and ``TransactionCoordinator`` (the
docstrings of the tests say which rule).
"""

from __future__ import annotations

import struct

import pytest

from coopconsumer import ConfigurationError
from coopconsumer._protocol import (
    Request,
    Response,
    decode_response,
    encode_request,
    encode_response,
)
from coopconsumer._protocol import error_codes as kerr
from coopconsumer._protocol.messages import (
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from coopconsumer.testing._txn_core import (
    DROP_CONNECTION,
    Answer,
    Drop,
    Forward,
    ProxyCore,
    RequestContext,
    cap_api_version,
)
from coopconsumer.testing._txn_messages import (
    PROXY_REQUESTS,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    EndTxnRequest,
    EndTxnResponse,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    InitProducerIdRequest,
    InitProducerIdResponse,
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
    error_response,
)

GROUP, TOPIC, TXN = "g", "t", "tx"


class Wire:
    """Feeds one core request and answer frames and reads what the client gets."""

    def __init__(self, core: ProxyCore | None = None) -> None:
        self.core = core or ProxyCore()
        self.now = 0.0
        self._cid = 0

    def send(self, request: Request, version: int) -> Forward | Answer | Drop:
        self._cid += 1
        frame = encode_request(
            request, api_version=version, correlation_id=self._cid, client_id="c"
        )
        return self.core.on_request(frame, self.now)

    def reply(self, action: Forward | Answer | Drop, response: Response) -> bytes | None:
        assert isinstance(action, Forward), action
        context = action.context
        frame = encode_response(
            response, api_version=context.api_version, correlation_id=context.correlation_id
        )
        return self.core.on_response(context, frame, self.now)

    def roundtrip(self, request: Request, version: int, response: Response) -> bytes | None:
        return self.reply(self.send(request, version), response)

    @staticmethod
    def read(cls: type[Response], frame: bytes | None, context: RequestContext) -> Response:
        assert frame is not None
        return decode_response(cls, frame, api_version=context.api_version)[1]

    def answered(self, action: Forward | Answer | Drop, cls: type[Response]) -> Response:
        assert isinstance(action, Answer), action
        return self.read(cls, action.frame, action.context)

    def join(
        self,
        member: str,
        generation: int,
        *,
        leader_of: tuple[str, ...] = (),
        instance: str | None = None,
        instances: dict[str, str] | None = None,
    ) -> None:
        """A member's JoinGroup (v5) answered for ``generation``; the leader's answer
        lists ``leader_of``."""
        self.roundtrip(
            JoinGroupRequest(
                group_id=GROUP,
                member_id=member,
                group_instance_id=instance,
                protocol_type="consumer",
            ),
            5,
            JoinGroupResponse(
                generation_id=generation,
                protocol_name="range",
                leader=leader_of[0] if leader_of else "someone",
                member_id=member,
                members=tuple(
                    JoinGroupResponseMember(member_id=m, group_instance_id=(instances or {}).get(m))
                    for m in leader_of
                ),
            ),
        )


def txn_commit(
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
    *,
    group: str = GROUP,
    epoch: int = 0,
    offset: int = 10,
) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id=TXN,
        group_id=group,
        producer_id=1000,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
        topics=(
            TxnOffsetCommitRequestTopic(
                name=TOPIC,
                partitions=(
                    TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset),
                ),
            ),
        ),
    )


def txn_commit_ok() -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=(
            TxnOffsetCommitResponseTopic(
                name=TOPIC, partitions=(TxnOffsetCommitResponsePartition(partition_index=0),)
            ),
        )
    )


def refusal(wire: Wire, request: TxnOffsetCommitRequest) -> int:
    """0 if the proxy forwards ``request`` to Tansu, else the error it answers."""
    action = wire.send(request, 3)
    if isinstance(action, Forward):
        return 0
    response = wire.answered(action, TxnOffsetCommitResponse)
    assert isinstance(response, TxnOffsetCommitResponse)
    (code,) = {p.error_code for t in response.topics for p in t.partitions}
    return code


# --------------------------------------------------------------------------- KIP-447 fencing


def test_txn_offset_commit_is_checked_against_the_generation_and_members() -> None:
    wire = Wire()
    wire.join("a", 1, leader_of=("a", "b"))
    wire.join("b", 1)
    assert refusal(wire, txn_commit(1, "a")) == 0
    assert refusal(wire, txn_commit(1, "b")) == 0
    assert refusal(wire, txn_commit(0, "a")) == kerr.ILLEGAL_GENERATION
    assert refusal(wire, txn_commit(2, "a")) == kerr.ILLEGAL_GENERATION
    assert refusal(wire, txn_commit(1, "zombie")) == kerr.UNKNOWN_MEMBER_ID
    # A member id with generation -1: the member is checked, then the generation.
    assert refusal(wire, txn_commit(-1, "a")) == kerr.ILLEGAL_GENERATION
    # Generation -1, no member, no instance: accepted without fencing, as Kafka does.
    assert refusal(wire, txn_commit(-1, "")) == 0
    assert wire.core.group_view(GROUP) == (1, {"a": None, "b": None})


def test_unknown_groups_accept_only_generation_minus_one() -> None:
    wire = Wire()
    assert refusal(wire, txn_commit(-1, "", group="never-joined")) == 0
    assert refusal(wire, txn_commit(3, "m", group="never-joined")) == kerr.ILLEGAL_GENERATION


def test_a_new_generation_drops_members_that_did_not_rejoin() -> None:
    wire = Wire()
    wire.join("a", 4, leader_of=("a", "b"))
    wire.join("b", 5)  # a follower's answer of the next generation arrives first
    wire.join("a", 5, leader_of=("a", "b"))
    wire.join("a", 4, leader_of=("a", "b", "c"))  # a late answer of generation 4: ignored
    assert wire.core.group_view(GROUP) == (5, {"a": None, "b": None})
    wire.join("a", 6, leader_of=("a",))
    assert refusal(wire, txn_commit(6, "a")) == 0
    assert refusal(wire, txn_commit(5, "b")) == kerr.UNKNOWN_MEMBER_ID


def test_static_members_are_fenced_by_instance_id() -> None:
    wire = Wire()
    wire.join("a-1", 2, leader_of=("a-1", "b"), instance="a", instances={"a-1": "a"})
    assert refusal(wire, txn_commit(2, "a-1", "a")) == 0
    assert refusal(wire, txn_commit(2, "a-0", "a")) == kerr.FENCED_INSTANCE_ID
    assert refusal(wire, txn_commit(2, "b", "other")) == kerr.UNKNOWN_MEMBER_ID


def test_a_static_member_joining_again_replaces_its_old_member_id() -> None:
    wire = Wire()
    wire.join("a-1", 2, leader_of=("a-1", "b"), instance="a", instances={"a-1": "a"})
    wire.join("a-2", 2, instance="a")  # restarted with the same instance id
    assert refusal(wire, txn_commit(2, "a-2", "a")) == 0
    assert refusal(wire, txn_commit(2, "a-1", "a")) == kerr.FENCED_INSTANCE_ID
    assert refusal(wire, txn_commit(2, "a-1")) == kerr.UNKNOWN_MEMBER_ID
    wire.roundtrip(
        LeaveGroupRequest(group_id=GROUP, members=(MemberIdentity(group_instance_id="a"),)),
        3,
        LeaveGroupResponse(members=(MemberResponse(group_instance_id="a"),)),
    )
    assert refusal(wire, txn_commit(2, "a-2", "a")) == kerr.UNKNOWN_MEMBER_ID
    assert wire.core.group_view(GROUP) == (2, {"b": None})


def test_leaving_and_forgotten_members_are_unknown() -> None:
    wire = Wire()
    wire.join("a", 0, leader_of=("a", "b", "c"))
    wire.roundtrip(
        LeaveGroupRequest(group_id=GROUP, members=(MemberIdentity(member_id="b"),)),
        3,
        LeaveGroupResponse(members=(MemberResponse(member_id="b"),)),
    )
    wire.roundtrip(
        HeartbeatRequest(group_id=GROUP, generation_id=0, member_id="c"),
        3,
        HeartbeatResponse(error_code=kerr.UNKNOWN_MEMBER_ID),
    )
    assert refusal(wire, txn_commit(0, "b")) == kerr.UNKNOWN_MEMBER_ID
    assert refusal(wire, txn_commit(0, "c")) == kerr.UNKNOWN_MEMBER_ID
    wire.roundtrip(LeaveGroupRequest(group_id=GROUP, member_id="a"), 1, LeaveGroupResponse())
    # Now empty: generation -1 is the simple-consumer path, a member still is checked.
    assert refusal(wire, txn_commit(-1, "")) == 0
    assert refusal(wire, txn_commit(0, "a")) == kerr.UNKNOWN_MEMBER_ID


def test_every_txn_offset_commit_is_recorded_with_its_answer() -> None:
    wire = Wire()
    wire.join("a", 1, leader_of=("a",))
    assert refusal(wire, txn_commit(0, "a", offset=5)) == kerr.ILLEGAL_GENERATION
    wire.roundtrip(txn_commit(1, "a", offset=6), 3, txn_commit_ok())
    wire.roundtrip(txn_commit(offset=7), 2, txn_commit_ok())  # v2 has no generation
    first, second, third = wire.core.txn_offset_commits
    assert (first.generation_id, first.error_code, first.fenced_by_proxy) == (0, 22, True)
    assert (second.generation_id, second.member_id, second.error_code) == (1, "a", 0)
    assert second.offsets == ((TOPIC, 0, 6),)
    assert not second.fenced_by_proxy
    assert (third.api_version, third.generation_id, third.member_id) == (2, -1, "")


# --------------------------------------------------------------------------- require_stable


def offset_fetch_v8(group: str = GROUP) -> tuple[OffsetFetchRequest, OffsetFetchResponse]:
    request = OffsetFetchRequest(
        groups=(
            OffsetFetchRequestGroup(
                group_id=group,
                topics=(OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0, 1)),),
            ),
        ),
        require_stable=True,
    )
    response = OffsetFetchResponse(
        groups=(
            OffsetFetchResponseGroup(
                group_id=group,
                topics=(
                    OffsetFetchResponseTopics(
                        name=TOPIC,
                        partitions=(
                            OffsetFetchResponsePartitions(partition_index=0, committed_offset=7),
                            OffsetFetchResponsePartitions(partition_index=1, committed_offset=3),
                        ),
                    ),
                ),
            ),
        )
    )
    return request, response


def fetched_v8(
    wire: Wire, request: OffsetFetchRequest, response: OffsetFetchResponse
) -> list[tuple[int, int, int]]:
    action = wire.send(request, 8)
    assert isinstance(action, Forward)
    out = wire.read(OffsetFetchResponse, wire.reply(action, response), action.context)
    assert isinstance(out, OffsetFetchResponse)
    return [
        (p.partition_index, p.committed_offset, p.error_code)
        for g in out.groups
        for t in g.topics
        for p in t.partitions
    ]


def test_offsets_of_an_open_transaction_are_unstable_until_it_ends() -> None:
    wire = Wire()
    request, response = offset_fetch_v8()
    assert fetched_v8(wire, request, response) == [(0, 7, 0), (1, 3, 0)]
    wire.roundtrip(txn_commit(offset=42), 3, txn_commit_ok())
    assert wire.core.pending_offsets() == {(GROUP, TOPIC, 0): frozenset({TXN})}
    assert fetched_v8(wire, request, response) == [(0, -1, kerr.UNSTABLE_OFFSET_COMMIT), (1, 3, 0)]
    # Without require_stable, or another group: Tansu's answer as is.
    unstable_free = OffsetFetchRequest(groups=request.groups)
    assert fetched_v8(wire, unstable_free, response) == [(0, 7, 0), (1, 3, 0)]
    other_request, other_response = offset_fetch_v8("other")
    assert fetched_v8(wire, other_request, other_response) == [(0, 7, 0), (1, 3, 0)]
    # A failed EndTxn leaves it open; an answered one ends it.
    end = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=0, committed=True)
    wire.roundtrip(end, 1, EndTxnResponse(error_code=kerr.CONCURRENT_TRANSACTIONS))
    assert fetched_v8(wire, request, response)[0][2] == kerr.UNSTABLE_OFFSET_COMMIT
    wire.roundtrip(end, 1, EndTxnResponse())
    assert wire.core.pending_offsets() == {}
    # Committed: the transaction's offset, whatever Tansu answers (next test).
    assert fetched_v8(wire, request, response) == [(0, 42, 0), (1, 3, 0)]


def test_a_committed_transaction_offsets_are_answered_at_once() -> None:
    """Kafka materialises a transaction's offsets when it commits. Tansu applies them
    only once every transaction that began earlier on a partition it wrote has ended,
    and then in the order of the transactional ids: its answer can be older than the
    last commit (here 7), so the proxy answers the committed offset itself, on every
    version, with or without require_stable."""
    wire = Wire()
    request, response = offset_fetch_v8()
    wire.roundtrip(txn_commit(offset=42), 3, txn_commit_ok())
    end = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=0, committed=True)
    wire.roundtrip(end, 1, EndTxnResponse())
    assert fetched_v8(wire, request, response) == [(0, 42, 0), (1, 3, 0)]
    assert fetched_v8(wire, OffsetFetchRequest(groups=request.groups), response) == [
        (0, 42, 0),
        (1, 3, 0),
    ]
    single = OffsetFetchRequest(
        group_id=GROUP, topics=(OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),)
    )
    single_answer = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name=TOPIC,
                partitions=(OffsetFetchResponsePartition(partition_index=0, committed_offset=-1),),
            ),
        )
    )
    for version in (1, 6):
        action = wire.send(single, version)
        out = wire.read(OffsetFetchResponse, wire.reply(action, single_answer), action.context)  # type: ignore[union-attr]
        assert isinstance(out, OffsetFetchResponse)
        assert out.topics[0].partitions[0].committed_offset == 42
    # Another group's answer is Tansu's.
    other_request, other_response = offset_fetch_v8("other")
    assert fetched_v8(wire, other_request, other_response) == [(0, 7, 0), (1, 3, 0)]


@pytest.mark.parametrize("ending", ["abort", "new epoch", "abort on timeout"])
def test_offsets_of_a_transaction_that_did_not_commit_never_show(ending: str) -> None:
    wire = Wire()
    request, response = offset_fetch_v8()
    open_transaction(wire, timeout_ms=1000)
    wire.roundtrip(txn_commit(offset=42, epoch=3), 3, txn_commit_ok())
    if ending == "abort":
        abort = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=3)
        wire.roundtrip(abort, 1, EndTxnResponse())
    elif ending == "new epoch":
        wire.roundtrip(
            InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=1000),
            1,
            InitProducerIdResponse(producer_id=1000, producer_epoch=4),
        )
    else:
        (due,) = wire.core.due_timeouts(2.0)
        wire.core.timeout_abort_done(due, 0)
    assert fetched_v8(wire, request, response) == [(0, 7, 0), (1, 3, 0)]


def test_a_lost_end_txn_answer_still_commits_what_tansu_committed() -> None:
    """The client never hears Tansu's answer (the connection drops), but Tansu
    committed: the offsets are no longer pending and take effect, so a client that
    dies before it retries leaves nothing unstable behind."""
    wire = Wire()
    request, response = offset_fetch_v8()
    wire.roundtrip(txn_commit(offset=42), 3, txn_commit_ok())
    wire.core.push_errors(26, [DROP_CONNECTION], after=True)
    end = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=0, committed=True)
    assert wire.roundtrip(end, 1, EndTxnResponse()) is None
    assert wire.core.pending_offsets() == {}
    assert fetched_v8(wire, request, response) == [(0, 42, 0), (1, 3, 0)]


def test_an_offset_commit_after_a_transaction_replaces_its_offset() -> None:
    wire = Wire()
    request, response = offset_fetch_v8()
    wire.roundtrip(txn_commit(offset=42), 3, txn_commit_ok())
    end = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=0, committed=True)
    wire.roundtrip(end, 1, EndTxnResponse())
    commit = OffsetCommitRequest(
        group_id=GROUP,
        topics=(
            OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=(OffsetCommitRequestPartition(partition_index=0, committed_offset=5),),
            ),
        ),
    )
    refused = OffsetCommitResponse(
        topics=(
            OffsetCommitResponseTopic(
                name=TOPIC,
                partitions=(
                    OffsetCommitResponsePartition(
                        partition_index=0, error_code=kerr.ILLEGAL_GENERATION
                    ),
                ),
            ),
        )
    )
    wire.roundtrip(commit, 8, refused)
    assert fetched_v8(wire, request, response)[0] == (0, 42, 0)
    accepted = OffsetCommitResponse(
        topics=(
            OffsetCommitResponseTopic(
                name=TOPIC, partitions=(OffsetCommitResponsePartition(partition_index=0),)
            ),
        )
    )
    wire.roundtrip(commit, 8, accepted)
    assert fetched_v8(wire, request, response)[0] == (0, 5, 0)


def test_a_new_producer_epoch_ends_the_transaction_it_finds_open() -> None:
    wire = Wire()
    wire.roundtrip(txn_commit(offset=42), 3, txn_commit_ok())
    wire.roundtrip(
        InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=60000),
        1,
        InitProducerIdResponse(producer_id=1000, producer_epoch=1),
    )
    assert wire.core.pending_offsets() == {}


def test_require_stable_on_the_single_group_versions() -> None:
    wire = Wire()
    wire.roundtrip(txn_commit(offset=42), 3, txn_commit_ok())
    request = OffsetFetchRequest(
        group_id=GROUP,
        topics=(OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),),
        require_stable=True,
    )
    response = OffsetFetchResponse(
        topics=(
            OffsetFetchResponseTopic(
                name=TOPIC,
                partitions=(OffsetFetchResponsePartition(partition_index=0, committed_offset=7),),
            ),
        )
    )
    for version, expected in ((7, (-1, kerr.UNSTABLE_OFFSET_COMMIT)), (6, (7, 0))):
        sent = (
            request if version >= 7 else OffsetFetchRequest(group_id=GROUP, topics=request.topics)
        )
        action = wire.send(sent, version)
        out = wire.read(OffsetFetchResponse, wire.reply(action, response), action.context)  # type: ignore[union-attr]
        assert isinstance(out, OffsetFetchResponse)
        (p,) = out.topics[0].partitions
        assert (p.committed_offset, p.error_code) == expected


# --------------------------------------------------------------------------- faults


def test_request_errors_are_answered_in_order_without_reaching_tansu() -> None:
    wire = Wire()
    wire.core.push_errors(25, [0, kerr.NOT_COORDINATOR, DROP_CONNECTION], after=False)
    add = AddOffsetsToTxnRequest(
        transactional_id=TXN, producer_id=1, producer_epoch=0, group_id=GROUP
    )
    assert isinstance(wire.send(add, 0), Forward)
    answer = wire.answered(wire.send(add, 0), AddOffsetsToTxnResponse)
    assert isinstance(answer, AddOffsetsToTxnResponse)
    assert answer.error_code == kerr.NOT_COORDINATOR
    assert isinstance(wire.send(add, 0), Drop)
    assert isinstance(wire.send(add, 0), Forward)  # the queue is empty again
    assert wire.core.faults_applied[25] == 2


def test_response_errors_reach_tansu_and_replace_its_answer() -> None:
    wire = Wire()
    wire.core.push_errors(28, [kerr.COORDINATOR_LOAD_IN_PROGRESS, DROP_CONNECTION], after=True)
    action = wire.send(txn_commit(offset=42), 3)
    out = wire.read(TxnOffsetCommitResponse, wire.reply(action, txn_commit_ok()), action.context)  # type: ignore[union-attr]
    assert isinstance(out, TxnOffsetCommitResponse)
    assert out.topics[0].partitions[0].error_code == kerr.COORDINATOR_LOAD_IN_PROGRESS
    # Tansu stored it: the offsets are pending, and the record shows what the client saw.
    assert (GROUP, TOPIC, 0) in wire.core.pending_offsets()
    assert wire.core.txn_offset_commits[-1].error_code == kerr.COORDINATOR_LOAD_IN_PROGRESS
    assert wire.roundtrip(txn_commit(offset=43), 3, txn_commit_ok()) is None  # dropped


def test_only_drop_and_pass_are_accepted_for_apis_without_error_answers() -> None:
    core = ProxyCore()
    with pytest.raises(ConfigurationError, match="API 3"):
        core.push_errors(3, [kerr.NOT_COORDINATOR], after=False)
    core.push_errors(3, [0, DROP_CONNECTION], after=False)
    wire = Wire(core)
    assert isinstance(wire.send(MetadataRequest(), 4), Forward)
    assert isinstance(wire.send(MetadataRequest(), 4), Drop)
    core.push_errors(3, [DROP_CONNECTION], after=False)
    core.clear_errors(3)
    assert isinstance(wire.send(MetadataRequest(), 4), Forward)


def test_a_coordinator_move_refuses_coordinator_requests_for_a_while() -> None:
    wire = Wire()
    wire.core.move_coordinators(2.0, group=True, transaction=False)
    join = JoinGroupRequest(group_id=GROUP, protocol_type="consumer")
    answer = wire.answered(wire.send(join, 5), JoinGroupResponse)
    assert isinstance(answer, JoinGroupResponse)
    assert answer.error_code == kerr.NOT_COORDINATOR
    end = EndTxnRequest(transactional_id=TXN, producer_id=1, producer_epoch=0)
    assert isinstance(wire.send(end, 1), Forward)  # the transaction coordinator stayed
    wire.core.move_coordinators(4.0, group=False, transaction=True)
    assert isinstance(wire.send(end, 1), Answer)
    idempotent = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0)
    assert isinstance(wire.send(idempotent, 1), Forward)  # any broker serves these
    wire.now = 4.0
    assert isinstance(wire.send(join, 5), Forward)
    assert isinstance(wire.send(end, 1), Forward)


def test_delays_are_attached_to_the_requests_of_their_api() -> None:
    wire = Wire()
    wire.core.set_delay(0.25, [28])
    slow = wire.send(txn_commit(), 3)
    fast = wire.send(MetadataRequest(), 4)
    assert isinstance(slow, Forward)
    assert slow.context.delay_s == 0.25
    assert isinstance(fast, Forward)
    assert fast.context.delay_s == 0.0
    wire.core.set_delay(0.1, None)
    every = wire.send(MetadataRequest(), 4)
    assert isinstance(every, Forward)
    assert every.context.delay_s == 0.1
    with pytest.raises(ConfigurationError):
        wire.core.set_delay(-1, None)


def test_acks_zero_produce_expects_no_answer() -> None:
    wire = Wire()
    produce = ProduceRequest(
        acks=0,
        topic_data=(
            TopicProduceData(
                name=TOPIC, partition_data=(PartitionProduceData(index=0, records=b""),)
            ),
        ),
    )
    for version in (3, 9):
        action = wire.send(produce, version)
        assert isinstance(action, Forward)
        assert not action.context.expects_response
        acked = wire.send(attrs_evolve_acks(produce, -1), version)
        assert isinstance(acked, Forward)
        assert acked.context.expects_response


def attrs_evolve_acks(request: ProduceRequest, acks: int) -> ProduceRequest:
    import attrs

    return attrs.evolve(request, acks=acks)


# --------------------------------------------------------------------------- timeouts


def _batch_header(producer_id: int, epoch: int) -> bytes:
    # Enough of a record batch v2 for the epoch check: magic at 16, producer at 43.
    head = bytearray(61)
    head[16] = 2
    struct.pack_into(">qh", head, 43, producer_id, epoch)
    return bytes(head)


def open_transaction(wire: Wire, timeout_ms: int) -> None:
    wire.roundtrip(
        InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=timeout_ms),
        1,
        InitProducerIdResponse(producer_id=1000, producer_epoch=3),
    )
    wire.roundtrip(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TXN,
            v3_and_below_producer_id=1000,
            v3_and_below_producer_epoch=3,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),),
        ),
        0,
        AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=(
                AddPartitionsToTxnTopicResult(
                    name=TOPIC,
                    results_by_partition=(AddPartitionsToTxnPartitionResult(partition_index=0),),
                ),
            )
        ),
    )


def test_a_transaction_open_past_its_timeout_is_due_and_its_epoch_fenced() -> None:
    wire = Wire()
    open_transaction(wire, timeout_ms=1000)
    wire.roundtrip(txn_commit(epoch=3, offset=42), 3, txn_commit_ok())
    assert wire.core.due_timeouts(0.999) == []
    (due,) = wire.core.due_timeouts(1.0)
    assert (due.transactional_id, due.producer_id, due.producer_epoch) == (TXN, 1000, 3)
    assert wire.core.due_timeouts(5.0) == []  # already being aborted
    wire.core.timeout_abort_done(due, 0)
    assert wire.core.pending_offsets() == {}
    assert wire.core.timed_out == [due]
    # The old epoch is refused as Kafka refuses it after fencing on timeout.
    end = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=3, committed=True)
    for version, code in ((1, kerr.INVALID_PRODUCER_EPOCH), (2, kerr.PRODUCER_FENCED)):
        answer = wire.answered(wire.send(end, version), EndTxnResponse)
        assert isinstance(answer, EndTxnResponse)
        assert answer.error_code == code
    assert refusal(wire, txn_commit(epoch=3)) == kerr.INVALID_PRODUCER_EPOCH
    assert wire.core.txn_offset_commits[-1].fenced_by_proxy
    produce = ProduceRequest(
        transactional_id=TXN,
        topic_data=(
            TopicProduceData(
                name=TOPIC,
                partition_data=(PartitionProduceData(index=0, records=_batch_header(1000, 3)),),
            ),
        ),
    )
    answer = wire.answered(wire.send(produce, 7), ProduceResponse)
    assert isinstance(answer, ProduceResponse)
    assert answer.responses[0].partition_responses[0].error_code == kerr.INVALID_PRODUCER_EPOCH
    # A new epoch (the producer restarted) is served.
    fresh = attrs_evolve_records(produce, _batch_header(1000, 4))
    assert isinstance(wire.send(fresh, 7), Forward)


def attrs_evolve_records(request: ProduceRequest, records: bytes) -> ProduceRequest:
    import attrs

    topic = request.topic_data[0]
    part = attrs.evolve(topic.partition_data[0], records=records)
    return attrs.evolve(request, topic_data=(attrs.evolve(topic, partition_data=(part,)),))


def test_an_ending_transaction_is_not_timed_out_unless_its_end_is_lost() -> None:
    wire = Wire()
    open_transaction(wire, timeout_ms=1000)
    end = wire.send(EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=3), 1)
    assert isinstance(end, Forward)
    assert wire.core.due_timeouts(10.0) == []
    wire.core.on_abandoned(end.context)  # the connection closed: outcome unknown
    assert len(wire.core.due_timeouts(10.0)) == 1


def test_a_failed_timeout_abort_is_reported_and_unfenced() -> None:
    wire = Wire()
    open_transaction(wire, timeout_ms=1000)
    (due,) = wire.core.due_timeouts(2.0)
    wire.core.timeout_abort_done(due, kerr.INVALID_TXN_STATE)
    assert "left open" in wire.core.failures[-1]
    end = EndTxnRequest(transactional_id=TXN, producer_id=1000, producer_epoch=3, committed=True)
    assert isinstance(wire.send(end, 1), Forward)


# --------------------------------------------------------------------------- the rest


def test_fetch_read_committed_is_marked_for_the_aborted_list() -> None:
    wire = Wire()
    fetch = FetchRequest(
        isolation_level=1,
        topics=(FetchTopic(topic=TOPIC, partitions=(FetchPartition(partition=0),)),),
    )
    for version in (4, 11, 12):
        action = wire.send(fetch, version)
        assert isinstance(action, Forward)
        assert action.context.read_committed
    plain = wire.send(FetchRequest(topics=fetch.topics), 12)
    assert isinstance(plain, Forward)
    assert not plain.context.read_committed


@pytest.mark.parametrize("version", [0, 2, 3])
def test_the_fetch_version_advertised_to_clients_is_capped(version: int) -> None:
    keys = (
        ApiVersionsResponseApiVersion(api_key=0, min_version=0, max_version=11),
        ApiVersionsResponseApiVersion(api_key=1, min_version=0, max_version=17),
        ApiVersionsResponseApiVersion(api_key=3, min_version=0, max_version=12),
    )
    frame = encode_response(
        ApiVersionsResponse(api_keys=keys), api_version=version, correlation_id=9
    )
    capped = cap_api_version(frame, version, 1, 12)
    (_cid, out) = decode_response(ApiVersionsResponse, capped, api_version=version)
    assert isinstance(out, ApiVersionsResponse)
    assert [(k.api_key, k.max_version) for k in out.api_keys] == [(0, 11), (1, 12), (3, 12)]
    assert cap_api_version(b"\x00\x00\x00\x09\x00", version, 1, 12) == b"\x00\x00\x00\x09\x00"


@pytest.mark.parametrize(
    ("cls", "version"),
    [
        (cls, v)
        for cls in PROXY_REQUESTS.values()
        for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
    ],
)
def test_every_error_answer_encodes_at_every_version(cls: type[Request], version: int) -> None:
    request = cls()
    frame = encode_request(request, api_version=version, correlation_id=1, client_id=None)
    assert frame  # the request itself is valid at this version
    response = error_response(request, kerr.NOT_COORDINATOR, version)
    assert encode_response(response, api_version=version, correlation_id=1)
