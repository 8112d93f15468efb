"""The reassignment executor's decisions as transcripts: inputs in, actions out, no
sockets, threads or clocks (docs/admin.md, "Reassigning partitions")."""

from __future__ import annotations

import ast
import json
import typing
from collections.abc import Sequence
from pathlib import Path

import pytest

from coopconsumer._types import TopicPartition
from coopconsumer.admin.reassign import (
    ExecutorConfig,
    ExecutorCore,
    MoveState,
    ObservedPartition,
    PartitionMove,
    Phase,
    ReassignmentError,
    ReassignmentPlan,
    replicas_to_keep,
)
from coopconsumer.admin.reassign._executor import (
    INPUT_TYPES,
    Cancel,
    CancelRequested,
    CancelSent,
    ClusterObserved,
    ConfigChanged,
    ElectPreferred,
    IllegalMoveTransition,
    Input,
    LeadersElected,
    ReadThrottles,
    RemoveThrottles,
    SetThrottles,
    Submit,
    Submitted,
    TargetChangeRequested,
    ThrottlesRead,
    ThrottlesRemoved,
    ThrottlesSet,
)


def tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


def plan(
    *sizes: int, target: tuple[int, ...] = (3, 4), original: tuple[int, ...] = (1, 2)
) -> ReassignmentPlan:
    return ReassignmentPlan(
        moves=[
            PartitionMove(
                topic="t", partition=i, replicas=target, original_replicas=original, size_bytes=s
            )
            for i, s in enumerate(sizes)
        ],
        description="test",
    )


def at(
    replicas: tuple[int, ...],
    *,
    adding: tuple[int, ...] = (),
    removing: tuple[int, ...] = (),
    isr: tuple[int, ...] | None = None,
    leader: int | None = None,
    min_isr: int = 1,
) -> ObservedPartition:
    isr = isr if isr is not None else tuple(r for r in replicas if r not in adding)
    return ObservedPartition(
        replicas=replicas,
        isr=isr,
        leader=leader if leader is not None else isr[0],
        adding=adding,
        removing=removing,
        min_insync_replicas=min_isr,
    )


ORIGINAL = at((1, 2))
MOVING = at((3, 4, 1, 2), adding=(3, 4), removing=(1, 2))
MOVED = at((3, 4))


def observe(core: ExecutorCore, now: float = 0.0, **states: ObservedPartition) -> list[object]:
    """Observe every partition of the plan: ``p3=MOVED`` and the rest ORIGINAL."""
    seen = {m.tp: states.get(f"p{m.partition}", ORIGINAL) for m in core.plan.moves}
    return list(core.handle(ClusterObserved(seen), now))


def submitted(actions: Sequence[object]) -> list[int]:
    (action,) = actions
    assert isinstance(action, Submit), actions
    return sorted(t.partition for t in action.targets)


def test_every_input_type_has_a_handler_and_unknown_inputs_raise() -> None:
    assert set(INPUT_TYPES) == set(typing.get_args(Input))
    with pytest.raises(TypeError):
        ExecutorCore(plan(1)).handle(object(), 0.0)  # type: ignore[arg-type]


def test_nothing_is_submitted_before_the_first_observation_of_a_run() -> None:
    core = ExecutorCore(plan(1, 2), ExecutorConfig(max_partitions=5))
    assert core.start(0.0) == []
    assert core.handle(Submitted(frozenset()), 0.0) == []  # no observation yet
    assert submitted(observe(core)) == [0, 1]


def test_sliding_window_starts_the_largest_first_and_refills_as_each_one_finishes() -> None:
    core = ExecutorCore(plan(10, 50, 30, 20, 40), ExecutorConfig(max_partitions=2))
    core.start(0.0)
    first = observe(core)
    assert submitted(first) == [1, 4]  # 50 and 40 bytes
    assert core.handle(Submitted(frozenset({tp(1), tp(4)})), 0.0) == []
    assert core.state_of(tp(1)) is MoveState.IN_FLIGHT
    # Partition 4 finishes while 1 is still moving: one new move starts at once.
    assert submitted(observe(core, 1.0, p1=MOVING, p4=MOVED)) == [2]
    assert core.state_of(tp(4)) is MoveState.DONE
    core.handle(Submitted(frozenset({tp(2)})), 1.0)
    assert observe(core, 2.0, p1=MOVING, p2=MOVING, p4=MOVED) == []
    assert submitted(observe(core, 3.0, p1=MOVED, p2=MOVED, p4=MOVED)) == [0, 3]
    core.handle(Submitted(frozenset({tp(0), tp(3)})), 3.0)
    assert observe(core, 4.0, **{f"p{i}": MOVED for i in range(5)}) == []
    assert core.finished
    assert core.phase is Phase.FINISHED
    progress = core.progress()
    assert (progress.done, progress.in_flight, progress.queued) == (5, 0, 0)
    assert progress.bytes_done == progress.bytes_total == 2 * 150


def test_byte_budget_holds_the_head_of_the_queue_and_a_move_larger_than_it_starts_alone() -> None:
    core = ExecutorCore(plan(100, 30, 30, 30), ExecutorConfig(max_partitions=10, max_bytes=120))
    core.start(0.0)
    assert submitted(observe(core)) == [0]  # 200 bytes to copy > 120: alone
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    assert observe(core, 1.0, p0=MOVING) == []
    assert submitted(observe(core, 2.0, p0=MOVED)) == [1, 2]  # 60 + 60; a third would exceed
    assert core.progress().bytes_in_flight == 120


RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def test_throttles_are_read_and_set_before_the_first_move_and_restored_after_the_last() -> None:
    core = ExecutorCore(plan(5, 5), ExecutorConfig(max_partitions=5, throttle_bytes_per_s=1000))
    assert core.start(0.0) == []
    (read,) = observe(core)  # the originals as the cluster shows them, then read
    assert read == ReadThrottles(topics=("t",), brokers=(1, 2, 3, 4))
    # An operator had set broker 2's follower rate and throttled 0:1 already.
    (throttle,) = core.handle(
        ThrottlesRead(
            rates={2: {RATES[1]: "5000"}},
            replicas={"t": {LISTS[0]: ("0:1",), LISTS[1]: ()}},
        ),
        0.0,
    )
    assert isinstance(throttle, SetThrottles)
    assert throttle.rate == 1000
    assert throttle.brokers == (1, 2, 3, 4)
    assert throttle.leader_replicas == {"t": ("0:2", "1:1", "1:2")}  # 0:1 was there
    assert throttle.follower_replicas == {"t": ("0:3", "0:4", "1:3", "1:4")}
    assert observe(core) == []  # throttles not confirmed yet
    assert core.handle(ThrottlesSet(), 0.0) != []
    core.handle(Submitted(frozenset({tp(0), tp(1)})), 0.0)
    (remove,) = observe(core, 1.0, p0=MOVED, p1=MOVED)
    assert isinstance(remove, RemoveThrottles)
    assert remove.brokers == (1, 2, 3, 4)
    # Only what this run added goes; broker 2 gets the operator's rate back.
    assert remove.leader_replicas == {"t": ("0:2", "1:1", "1:2")}
    assert remove.rates[2] == {RATES[0]: None, RATES[1]: "5000"}
    assert remove.rates[1] == {RATES[0]: None, RATES[1]: None}
    assert core.phase is Phase.UNTHROTTLING
    assert not core.finished
    assert core.handle(ThrottlesRemoved(), 2.0) == []
    assert core.finished
    assert core.finished_at == 2.0


def test_rates_another_tool_removed_while_moves_copy_are_set_again() -> None:
    """Kafka's kafka-reassign-partitions --verify deletes every broker's throttle
    rates once its own moves end (seen on Kafka 4.4, tests/admin/test_admin_on_kafka.py);
    the executor sets its rates and entries again when it sees them gone."""
    core = ExecutorCore(plan(5, 5), ExecutorConfig(max_partitions=5, throttle_bytes_per_s=1000))
    core.start(0.0)
    observe(core)
    (throttle,) = core.handle(ThrottlesRead(rates={}, replicas={}), 0.0)
    core.handle(ThrottlesSet(), 0.0)
    core.handle(Submitted(frozenset({tp(0), tp(1)})), 0.0)
    assert core.throttled_brokers() == (1, 2, 3, 4)
    ours: dict[str, str | None] = dict.fromkeys(RATES, "1000")
    intact: dict[int, dict[str, str | None]] = dict.fromkeys((1, 2, 3, 4), ours)
    seen = {m.tp: MOVING for m in core.plan.moves}
    assert core.handle(ClusterObserved(seen, throttle_rates=intact), 1.0) == []
    cleared: dict[int, dict[str, str | None]] = {**intact, 3: dict.fromkeys(RATES)}
    (again,) = core.handle(ClusterObserved(seen, throttle_rates=cleared), 2.0)
    assert again == throttle  # the same rate and entries, set again
    # Once the moves are done the rates are put back, not checked.
    (remove,) = observe(core, 3.0, p0=MOVED, p1=MOVED)
    assert isinstance(remove, RemoveThrottles)
    assert core.throttled_brokers() == ()


def test_a_topic_throttled_entirely_gets_no_entries_and_keeps_its_star() -> None:
    core = ExecutorCore(plan(5), ExecutorConfig(max_partitions=5, throttle_bytes_per_s=10))
    observe(core)
    (throttle,) = core.handle(
        ThrottlesRead(rates={}, replicas={"t": {LISTS[0]: ("*",), LISTS[1]: ("*",)}}), 0.0
    )
    assert isinstance(throttle, SetThrottles)
    assert (throttle.leader_replicas, throttle.follower_replicas) == ({}, {})


def test_a_partition_another_tool_is_moving_is_left_alone_and_named() -> None:
    core = ExecutorCore(plan(3, 2, 1), ExecutorConfig(max_partitions=5))
    core.start(0.0)
    theirs = at((1, 5, 2), adding=(5,), removing=(2,))
    assert submitted(observe(core, p1=theirs)) == [0, 2]
    assert core.state_of(tp(1)) is MoveState.CONFLICT
    (error,) = [e for m, _, e in core.moves() if m.partition == 1]
    assert error is not None
    assert "another tool is moving it (replicas [1, 5, 2], adding [5], removing [2])" in error
    # One we submitted but that the broker shows with another target was not ours.
    core.handle(Submitted(frozenset({tp(0), tp(2)})), 0.0)
    observe(core, 1.0, p0=MOVING, p2=at((3, 6, 1, 2), adding=(3, 6), removing=(1, 2)))
    assert core.state_of(tp(2)) is MoveState.CONFLICT
    assert core.state_of(tp(0)) is MoveState.IN_FLIGHT
    observe(core, 2.0, p0=MOVED, p2=at((3, 6)))
    assert core.finished
    assert core.progress().counts[MoveState.CONFLICT] == 2


def test_override_takes_over_and_keeps_what_was_really_there_before() -> None:
    core = ExecutorCore(plan(3), ExecutorConfig(max_partitions=5, override=True))
    core.start(0.0)
    theirs = at((1, 5, 2), adding=(5,), removing=(2,))
    assert submitted(observe(core, p0=theirs)) == [0]
    assert core.original_of(tp(0)) == (1, 2)  # the other tool's original, not its target


def test_originals_are_read_again_at_submission() -> None:
    # Planned from (1, 2); by the time it is submitted the partition is on (1, 5).
    core = ExecutorCore(plan(3), ExecutorConfig(max_partitions=5))
    core.start(0.0)
    assert submitted(observe(core, p0=at((1, 5)))) == [0]
    assert core.original_of(tp(0)) == (1, 5)
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    core.handle(CancelRequested(None), 1.0)
    # Kafka reverts to what was there: the move is cancelled, not sent "back" to (1, 2).
    assert observe(core, 2.0, p0=at((1, 5))) == []
    assert core.state_of(tp(0)) is MoveState.CANCELLED
    assert core.to_dict()["moves"][0]["planned_original"] == [1, 2]
    again = ExecutorCore(plan(3), ExecutorConfig(max_partitions=5))
    observe(again, p0=at((1, 5)))
    again.handle(Submitted(frozenset({tp(0)})), 0.0)
    observe(again, 1.0, p0=MOVED)
    assert again.rollback_plan().moves[0].replicas == (1, 5)


def test_a_per_broker_cap_holds_only_the_moves_of_a_busy_broker() -> None:
    moves = [
        PartitionMove(topic="t", partition=0, replicas=(3,), original_replicas=(1,), size_bytes=9),
        PartitionMove(topic="t", partition=1, replicas=(4,), original_replicas=(1,), size_bytes=8),
        PartitionMove(topic="t", partition=2, replicas=(5,), original_replicas=(2,), size_bytes=7),
    ]
    core = ExecutorCore(
        ReassignmentPlan(moves=moves), ExecutorConfig(max_partitions=10, max_moves_per_broker=1)
    )
    seen = {tp(0): at((1,)), tp(1): at((1,)), tp(2): at((2,))}
    # 0 and 1 both move out of broker 1: 1 waits, 2 (brokers 2 and 5) overtakes it.
    assert submitted(core.handle(ClusterObserved(seen), 0.0)) == [0, 2]
    core.handle(Submitted(frozenset({tp(0), tp(2)})), 0.0)
    moving = at((3, 1), adding=(3,), removing=(1,))
    assert core.handle(ClusterObserved({**seen, tp(0): moving}), 1.0) == []
    assert submitted(core.handle(ClusterObserved({**seen, tp(0): at((3,))}), 2.0)) == [1]


def test_preferred_leaders_are_elected_after_moves_that_end_with_another_leader() -> None:
    core = ExecutorCore(
        plan(2, 1, target=(3, 4)), ExecutorConfig(max_partitions=5, elect_preferred_leaders=True)
    )
    observe(core)
    core.handle(Submitted(frozenset({tp(0), tp(1)})), 0.0)
    actions = observe(core, 1.0, p0=at((3, 4), leader=4), p1=at((3, 4), leader=3))
    assert actions == [ElectPreferred((tp(0),))]
    core.handle(LeadersElected({tp(0): "elected"}), 1.0)
    assert core.election_of(tp(0)) == "elected"
    assert core.election_of(tp(1)) is None
    assert core.finished


def test_the_window_and_the_throttle_change_while_it_runs() -> None:
    core = ExecutorCore(plan(3, 2, 1), ExecutorConfig(max_partitions=1, throttle_bytes_per_s=10))
    observe(core)
    core.handle(ThrottlesRead(rates={}, replicas={}), 0.0)
    assert submitted(core.handle(ThrottlesSet(), 0.0)) == [0]
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    (faster, more) = core.handle(
        ConfigChanged(ExecutorConfig(max_partitions=3, throttle_bytes_per_s=50)), 1.0
    )
    assert isinstance(faster, SetThrottles)
    assert faster.rate == 50
    assert submitted([more]) == [1, 2]
    (remove,) = core.handle(ConfigChanged(ExecutorConfig(max_partitions=3)), 2.0)
    assert isinstance(remove, RemoveThrottles)
    assert core.phase is Phase.RUNNING
    core.handle(Submitted(frozenset({tp(1), tp(2)})), 2.0)
    assert observe(core, 3.0, p0=MOVED, p1=MOVED, p2=MOVED) == []
    assert core.finished  # no throttle left to remove


def test_a_refused_move_fails_and_its_slot_is_reused() -> None:
    core = ExecutorCore(plan(3, 2, 1), ExecutorConfig(max_partitions=1))
    core.start(0.0)
    assert submitted(observe(core)) == [0]
    again = core.handle(Submitted(frozenset({tp(0)}), {tp(0): "INVALID_REPLICA_ASSIGNMENT"}), 0.0)
    assert submitted(again) == [1]
    assert core.state_of(tp(0)) is MoveState.FAILED
    assert core.moves()[0][2] == "INVALID_REPLICA_ASSIGNMENT"


def test_a_partition_already_on_its_target_is_done_without_a_submission() -> None:
    core = ExecutorCore(plan(1, 1), ExecutorConfig(max_partitions=5))
    core.start(0.0)
    assert submitted(observe(core, p0=MOVED)) == [1]
    assert core.state_of(tp(0)) is MoveState.DONE
    assert core.submissions_of(tp(0)) == 0


def test_cancel_drops_queued_moves_and_cancels_in_flight_ones_through_the_api() -> None:
    core = ExecutorCore(plan(4, 3, 2, 1), ExecutorConfig(max_partitions=2))
    core.start(0.0)
    observe(core)
    core.handle(Submitted(frozenset({tp(0), tp(1)})), 0.0)
    actions = core.handle(CancelRequested(None), 1.0)
    assert actions == [Cancel((tp(0), tp(1)))]
    assert core.state_of(tp(2)) is MoveState.CANCELLED
    assert core.state_of(tp(0)) is MoveState.CANCELLING
    assert core.handle(CancelSent(frozenset({tp(0), tp(1)})), 1.0) == []
    # Partition 0 was reverted; partition 1 had finished before the cancel arrived.
    assert observe(core, 2.0, p0=ORIGINAL, p1=MOVED) == []
    assert core.state_of(tp(0)) is MoveState.CANCELLED
    assert core.state_of(tp(1)) is MoveState.DONE
    assert core.finished
    assert [m.partition for m in core.rollback_plan().moves] == [1]
    assert core.rollback_plan().moves[0].replicas == (1, 2)


def test_cancel_of_some_partitions_lets_the_rest_run() -> None:
    core = ExecutorCore(plan(4, 3, 2, 1), ExecutorConfig(max_partitions=2))
    core.start(0.0)
    observe(core)
    core.handle(Submitted(frozenset({tp(0), tp(1)})), 0.0)
    assert core.handle(CancelRequested(frozenset({tp(0), tp(3)})), 1.0) == [Cancel((tp(0),))]
    assert core.state_of(tp(3)) is MoveState.CANCELLED
    assert submitted(observe(core, 2.0, p0=ORIGINAL, p1=MOVING)) == [2]
    with pytest.raises(ReassignmentError):
        core.handle(CancelRequested(frozenset({TopicPartition("other", 0)})), 2.0)


def test_resume_neither_repeats_nor_forgets_a_submission() -> None:
    core = ExecutorCore(plan(1, 1, 1), ExecutorConfig(max_partitions=3))
    core.start(0.0)
    assert submitted(observe(core)) == [0, 1, 2]
    # The process dies with all three decided: the file says SUBMITTING for each.
    saved = json.loads(json.dumps(core.to_dict()))
    resumed = ExecutorCore.from_dict(saved)
    assert resumed.state_of(tp(0)) is MoveState.SUBMITTING
    assert resumed.start(5.0) == []
    # 0 reached the broker and is moving, 1 reached it and finished, 2 never did.
    again = observe(resumed, 5.0, p0=MOVING, p1=MOVED, p2=ORIGINAL)
    assert submitted(again) == [2]
    assert resumed.state_of(tp(0)) is MoveState.IN_FLIGHT
    assert resumed.state_of(tp(1)) is MoveState.DONE
    assert resumed.submissions_of(tp(2)) == 2  # decided twice, sent once: 0 never saw it


def test_persisted_state_round_trips_mid_run() -> None:
    core = ExecutorCore(plan(3, 2, 1), ExecutorConfig(max_partitions=1, throttle_bytes_per_s=9))
    core.start(0.0)
    observe(core)
    core.handle(ThrottlesRead(rates={1: {RATES[0]: "7"}}, replicas={}), 0.0)
    resumed = ExecutorCore.from_dict(json.loads(json.dumps(core.to_dict())))
    (again,) = resumed.start(1.0)  # read before the crash: set again, not read again
    assert isinstance(again, SetThrottles)
    assert resumed.saved_throttles == core.saved_throttles
    core.handle(ThrottlesSet(), 0.0)
    observe(core)
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    copy = ExecutorCore.from_dict(json.loads(json.dumps(core.to_dict())))
    assert copy.to_dict() == core.to_dict()
    assert copy.config == core.config
    assert copy.phase is Phase.RUNNING
    with pytest.raises(ReassignmentError):
        ExecutorCore.from_dict({"version": 99})
    with pytest.raises(ReassignmentError):
        ExecutorCore.from_dict({**core.to_dict(), "moves": [{"topic": "t"}]})


def test_an_in_flight_move_reverted_by_someone_else_counts_as_cancelled() -> None:
    core = ExecutorCore(plan(1), ExecutorConfig(max_partitions=1))
    core.start(0.0)
    observe(core)
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    observe(core, 1.0, p0=ORIGINAL)
    assert core.state_of(tp(0)) is MoveState.CANCELLED
    assert core.moves()[0][2] == "reverted outside this executor"


def test_a_deleted_partition_fails_its_move() -> None:
    core = ExecutorCore(plan(1, 1), ExecutorConfig(max_partitions=1))
    core.start(0.0)
    core.handle(ClusterObserved({tp(1): ORIGINAL}), 0.0)
    assert core.state_of(tp(0)) is MoveState.FAILED


def test_illegal_transitions_fail_loudly() -> None:
    core = ExecutorCore(plan(1))
    move = core._moves[tp(0)]
    with pytest.raises(IllegalMoveTransition):
        core._to(move, MoveState.IN_FLIGHT, 0.0)


# ---------------------------------------------------------------------- seed 000's rule


def test_replicas_to_keep_puts_the_leader_first_then_in_sync_then_out_of_sync() -> None:
    # [1,2] -> [2,3], then changed to [2,4]: 3 is neither original nor the new target.
    assert replicas_to_keep(2, (2, 3, 1), isr=(1, 2), leader=1) == (1, 2)
    # The new replica 3 became leader: it is kept before anything else.
    assert replicas_to_keep(2, (2, 3, 1), isr=(3, 2, 1), leader=3) == (3, 2)
    # Too few in sync: out-of-sync ones fill up, sorted.
    assert replicas_to_keep(3, (5, 4, 1, 2, 3), isr=(1,), leader=1) == (1, 2, 3)


def test_a_target_change_in_flight_keeps_the_leader_until_the_new_replicas_are_in_sync() -> None:
    core = ExecutorCore(plan(1, target=(2, 3), original=(1, 2)), ExecutorConfig(max_partitions=1))
    core.start(0.0)
    observe(core)
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    moving = at((2, 3, 1), adding=(3,), removing=(1,), isr=(1, 2), leader=1)
    observe(core, 1.0, p0=moving)
    (interim,) = core.handle(TargetChangeRequested(tp(0), (2, 4)), 1.0)
    # Leader 1 and in-sync 2 stay (the original count, 2); 3 may go at once.
    assert interim == Submit({tp(0): (2, 4, 1)})
    core.handle(Submitted(frozenset({tp(0)})), 1.0)
    assert core.target_of(tp(0)) == (2, 4)
    observe(core, 2.0, p0=at((2, 4, 1), adding=(4,), removing=(), isr=(1, 2), leader=1))
    # The interim is reached (4 in sync): now 1 goes.
    (final,) = observe(core, 3.0, p0=at((2, 4, 1), isr=(1, 2, 4), leader=1))
    assert final == Submit({tp(0): (2, 4)})
    core.handle(Submitted(frozenset({tp(0)})), 3.0)
    observe(core, 4.0, p0=at((2, 4)))
    assert core.state_of(tp(0)) is MoveState.DONE
    assert core.rollback_plan().moves[0].replicas == (1, 2)


def test_a_target_change_is_refused_below_min_insync_replicas_and_when_not_in_flight() -> None:
    core = ExecutorCore(
        plan(1, 1, target=(3, 4), original=(1, 2)), ExecutorConfig(max_partitions=1)
    )
    core.start(0.0)
    observe(core)
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    observe(core, 1.0, p0=at((3, 4, 1, 2), adding=(3, 4), removing=(1, 2), min_isr=3))
    with pytest.raises(ReassignmentError, match=r"min\.insync\.replicas"):
        core.handle(TargetChangeRequested(tp(0), (3, 5)), 1.0)
    assert core.target_of(tp(0)) == (3, 4)
    # A queued move just takes the new target.
    assert core.handle(TargetChangeRequested(tp(1), (5, 6)), 1.0) == []
    assert core.target_of(tp(1)) == (5, 6)
    with pytest.raises(ReassignmentError):
        core.handle(TargetChangeRequested(tp(1), (5, 5)), 1.0)
    observe(core, 2.0, p0=MOVED)
    with pytest.raises(ReassignmentError, match="done"):
        core.handle(TargetChangeRequested(tp(0), (5, 6)), 2.0)


def test_the_sans_io_cores_import_nothing_that_blocks() -> None:
    root = Path(__file__).resolve().parents[2] / "src" / "coopconsumer" / "admin"
    blocking = {"socket", "selectors", "threading", "time", "asyncio", "subprocess"}
    for path in (
        root / "reassign" / "_executor.py",
        root / "reassign" / "_plan.py",
        root / "heal" / "_heal_core.py",
    ):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert name.split(".")[0] not in blocking, (path.name, name)
                assert "_driver" not in name, (path.name, name)
                assert "_client" not in name, (path.name, name)


def test_metadata_that_still_lists_the_removed_replicas_is_no_revert() -> None:
    # Metadata may lag ListPartitionReassignments (brokers' caches, or two reads a
    # moment apart): the move ended, but the replicas still include the old ones.
    core = ExecutorCore(plan(1), ExecutorConfig(max_partitions=1))
    observe(core)
    core.handle(Submitted(frozenset({tp(0)})), 0.0)
    assert observe(core, 1.0, p0=at((3, 4, 1, 2))) == []
    assert core.state_of(tp(0)) is MoveState.IN_FLIGHT
    observe(core, 2.0, p0=MOVED)
    assert core.state_of(tp(0)) is MoveState.DONE
