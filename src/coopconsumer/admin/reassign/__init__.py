"""Batched, cancellable partition reassignment with rollback, over KIP-455.

A :class:`ReassignmentPlan` records per partition the target and the original
replicas; :func:`plan_move_off`, :func:`plan_add_brokers` and :func:`plan_rebalance`
generate one from a goal. :class:`ReassignmentExecutor` runs it as a sliding window
(at most N partitions and B bytes in flight, a new move as soon as one finishes),
with replication throttles set before and removed after, cancel, target changes and
a state file that lets a killed executor resume. Its decisions live in the sans-I/O
:class:`ExecutorCore`. See docs/admin.md, "Reassigning partitions"::

    from coopconsumer.admin import AdminClient
    from coopconsumer.admin.reassign import ExecutorConfig, ReassignmentExecutor, plan_move_off

    with AdminClient({"bootstrap.servers": "localhost:9092"}) as admin:
        plan = plan_move_off(admin.cluster_view(), [3], admin.replica_assignor)
        executor = ReassignmentExecutor.create(
            admin, plan, ExecutorConfig(max_partitions=50), state_path="move.state"
        )
        executor.run()
"""

from ._executor import ExecutorConfig as ExecutorConfig
from ._executor import ExecutorCore as ExecutorCore
from ._executor import MoveState as MoveState
from ._executor import ObservedPartition as ObservedPartition
from ._executor import Phase as Phase
from ._executor import Progress as Progress
from ._executor import ReassignmentError as ReassignmentError
from ._executor import replicas_to_keep as replicas_to_keep
from ._plan import PartitionMove as PartitionMove
from ._plan import PlanError as PlanError
from ._plan import ReassignmentPlan as ReassignmentPlan
from ._plan import check_brokers_known as check_brokers_known
from ._plan import plan_add_brokers as plan_add_brokers
from ._plan import plan_balance_disks as plan_balance_disks
from ._plan import plan_move_off as plan_move_off
from ._plan import plan_rebalance as plan_rebalance
from ._reassign_driver import ExecutorBusyError as ExecutorBusyError
from ._reassign_driver import ReassignmentAdmin as ReassignmentAdmin
from ._reassign_driver import ReassignmentExecutor as ReassignmentExecutor
from ._reassign_driver import executor_running as executor_running
from ._reassign_driver import load_state as load_state
from ._reassign_driver import request_cancel as request_cancel
from ._reassign_driver import request_target_change as request_target_change

__all__ = [
    "ExecutorBusyError",
    "ExecutorConfig",
    "ExecutorCore",
    "MoveState",
    "ObservedPartition",
    "PartitionMove",
    "Phase",
    "PlanError",
    "Progress",
    "ReassignmentAdmin",
    "ReassignmentError",
    "ReassignmentExecutor",
    "ReassignmentPlan",
    "check_brokers_known",
    "executor_running",
    "load_state",
    "plan_add_brokers",
    "plan_balance_disks",
    "plan_move_off",
    "plan_rebalance",
    "replicas_to_keep",
    "request_cancel",
    "request_target_change",
]
