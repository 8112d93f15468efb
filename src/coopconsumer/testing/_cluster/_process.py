"""The replication test cluster in a child process: the parent's proxy and the child.

The child (``python -m coopconsumer.testing._cluster._process SPEC``) serves an
``InProcessCluster`` and takes JSON-line commands on stdin (one per test-side method),
answering each on stdout; it stops when stdin closes, so it never outlives its
parent. The parent side, :class:`SubprocessCluster`, runs it through the same managed
process plumbing as the mock broker (own session, stderr to a log, process group
killed on stop).

Imports the standard library, attrs and the sibling modules.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from ..._errors import BrokerConnectionError, ConfigurationError, RequestTimeoutError
from .._broker import BrokerStartupError, _ManagedProcess
from ._cluster_api import ClusterCommandError, ReplicationCluster
from ._model import (
    BrokerSpec,
    BrokerState,
    BrokerView,
    LogDirView,
    Outcome,
    PartitionState,
    PartitionView,
    ReplicaState,
)

__all__ = ["SubprocessCluster", "start_subprocess_cluster"]

_COMMAND_TIMEOUT_S: Final = 30.0
_MODULE: Final = "coopconsumer.testing._cluster._process"


# --------------------------------------------------------------------------- wire format


def partition_to_json(view: PartitionView) -> dict[str, Any]:
    data = attrs.asdict(view, recurse=False)
    data["state"] = view.state.value
    data["replica_states"] = {str(k): v.value for k, v in view.replica_states.items()}
    for key in ("replica_bytes", "replica_dirs", "future_dirs", "future_bytes"):
        data[key] = {str(k): v for k, v in getattr(view, key).items()}
    for key in ("replicas", "isr", "adding", "removing", "offline_replicas"):
        data[key] = list(data[key])
    return data


def partition_from_json(data: Mapping[str, Any]) -> PartitionView:
    return PartitionView(
        topic=data["topic"],
        partition=data["partition"],
        state=PartitionState(data["state"]),
        replicas=tuple(data["replicas"]),
        isr=tuple(data["isr"]),
        leader=data["leader"],
        leader_epoch=data["leader_epoch"],
        adding=tuple(data["adding"]),
        removing=tuple(data["removing"]),
        size_bytes=data["size_bytes"],
        acknowledged_bytes=data["acknowledged_bytes"],
        replica_bytes={int(k): v for k, v in data["replica_bytes"].items()},
        replica_states={int(k): ReplicaState(v) for k, v in data["replica_states"].items()},
        offline_replicas=tuple(data["offline_replicas"]),
        replica_dirs={int(k): v for k, v in data["replica_dirs"].items()},
        future_dirs={int(k): v for k, v in data["future_dirs"].items()},
        future_bytes={int(k): v for k, v in data["future_bytes"].items()},
        produce_bytes_per_s=data["produce_bytes_per_s"],
    )


def broker_to_json(view: BrokerView) -> dict[str, Any]:
    data = attrs.asdict(view, recurse=True)
    data["state"] = view.state.value
    return data


def broker_from_json(data: Mapping[str, Any]) -> BrokerView:
    return BrokerView(
        **{
            **data,
            "state": BrokerState(data["state"]),
            "log_dirs": [LogDirView(**d) for d in data["log_dirs"]],
        }
    )


# --------------------------------------------------------------------------- parent side


class SubprocessCluster(ReplicationCluster):
    """The replication test cluster served by a child process (see
    :class:`ReplicationCluster` for the methods). If the child dies, every method
    raises ``BrokerConnectionError`` with the end of its output."""

    def __init__(self, process: _ManagedProcess, host: str, ports: Mapping[int, int]) -> None:
        self._process = process
        self._host = host
        self._ports = dict(ports)

    @property
    def pid(self) -> int:
        """PID of the child process."""
        return self._process.pid

    def stop(self) -> None:
        self._process.stop()
        self._process.discard_log()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self._host}:{port}" for port in self._ports.values())

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(self._ports)

    def address(self, node_id: int) -> tuple[str, int]:
        return self._host, self._ports[node_id]

    @property
    def now(self) -> float:
        return float(self._call("now"))

    @property
    def unclean_elections(self) -> int:
        return int(self._call("unclean_elections"))

    def brokers(self) -> list[BrokerView]:
        return [broker_from_json(b) for b in self._call("brokers")]

    def partition(self, topic: str, partition: int) -> PartitionView:
        return partition_from_json(self._call("partition", topic=topic, partition=partition))

    def partitions(self, topic: str) -> list[PartitionView]:
        return [partition_from_json(p) for p in self._call("partitions", topic=topic)]

    def topics(self) -> list[str]:
        return list(self._call("topics"))

    def topics_being_deleted(self) -> dict[str, list[tuple[int, int]]]:
        return {
            name: [(int(p), int(b)) for p, b in pairs]
            for name, pairs in self._call("topics_being_deleted").items()
        }

    def request_counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._call("request_counts").items()}

    def response_bytes(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._call("response_bytes").items()}

    def reset_request_counts(self) -> None:
        self._call("reset_request_counts")

    def create_topic(
        self,
        name: str,
        assignment: Sequence[Sequence[int]],
        *,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        self._call(
            "create_topic",
            name=name,
            assignment=[list(r) for r in assignment],
            configs=dict(configs or {}),
        )

    def kill_broker(self, node_id: int) -> None:
        self._call("kill_broker", node_id=node_id)

    def pause_broker(self, node_id: int) -> None:
        self._call("pause_broker", node_id=node_id)

    def revive_broker(self, node_id: int) -> None:
        self._call("revive_broker", node_id=node_id)

    def set_partition_size(self, topic: str, partition: int, size_bytes: int) -> None:
        self._call("set_partition_size", topic=topic, partition=partition, size_bytes=size_bytes)

    def grow_partition(self, topic: str, partition: int, num_bytes: int) -> None:
        self._call("grow_partition", topic=topic, partition=partition, num_bytes=num_bytes)

    def set_replication_rate(self, node_id: int, bytes_per_s: float) -> None:
        self._call("set_replication_rate", node_id=node_id, bytes_per_s=bytes_per_s)

    def set_produce_rate(self, topic: str, partition: int, bytes_per_s: float) -> None:
        self._call("set_produce_rate", topic=topic, partition=partition, bytes_per_s=bytes_per_s)

    def advance_time(self, seconds: float) -> None:
        self._call("advance_time", seconds=seconds)

    def _call(self, op: str, **args: Any) -> Any:
        try:
            reply = self._process.request({"op": op, "args": args}, _COMMAND_TIMEOUT_S)
        except TimeoutError as exc:
            raise RequestTimeoutError(
                f"cluster command {op} got no answer within {_COMMAND_TIMEOUT_S} s",
                broker=self.bootstrap,
            ) from exc
        if reply is None:
            raise BrokerConnectionError(
                f"the cluster process is gone (exit status {self._process.exit_status()}); "
                f"its output ends with:\n{self._process.output_tail()}",
                broker=self.bootstrap,
            )
        if reply.get("ok"):
            return reply.get("result")
        message = str(reply.get("error"))
        if reply.get("kind") == "ClusterCommandError":
            raise ClusterCommandError(Outcome(error_code=int(reply["code"]), message=message))
        if reply.get("kind") == "ConfigurationError":
            raise ConfigurationError(message)
        raise BrokerConnectionError(f"cluster command {op} failed: {message}")


def start_subprocess_cluster(
    brokers: Sequence[BrokerSpec],
    *,
    manual_clock: bool,
    replica_lag_time_max_s: float,
    startup_timeout_s: float = 30.0,
) -> SubprocessCluster:
    """Start the child and return once it serves every broker's port.

    Raises ``BrokerStartupError`` (with the child's output) when it cannot start;
    nothing is left running then.
    """
    spec = json.dumps(
        {
            "brokers": [attrs.asdict(b) for b in brokers],
            "manual_clock": manual_clock,
            "replica_lag_time_max_s": replica_lag_time_max_s,
        }
    )
    # The child imports this very package: put it first on the child's path.
    root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    process = _ManagedProcess(
        [sys.executable, "-m", _MODULE, spec], env=env, label="replication-cluster"
    )
    deadline = time.monotonic() + startup_timeout_s
    try:
        while True:
            line = process.read_line(max(0.1, deadline - time.monotonic()))
            if line is None:
                raise ChildProcessError(process.exit_reason() or "the child closed stdout")
            try:
                hello = json.loads(line)
            except ValueError:
                continue
            if isinstance(hello, dict) and "ready" in hello:
                break
        if not hello["ready"]:
            raise ChildProcessError(str(hello.get("error")))
        ports = {int(k): int(v) for k, v in hello["ports"].items()}
        return SubprocessCluster(process, str(hello["host"]), ports)
    except (ChildProcessError, TimeoutError, KeyError, ValueError) as exc:
        tail = process.output_tail()
        process.stop()
        process.discard_log()
        raise BrokerStartupError(
            f"the replication cluster process did not start: {exc}", stderr_tail=tail
        ) from None


# --------------------------------------------------------------------------- child side

_OPS: Final[Mapping[str, Callable[..., Any]]] = {
    "now": lambda c: c.now,
    "unclean_elections": lambda c: c.unclean_elections,
    "brokers": lambda c: [broker_to_json(b) for b in c.brokers()],
    "partition": lambda c, topic, partition: partition_to_json(c.partition(topic, partition)),
    "partitions": lambda c, topic: [partition_to_json(p) for p in c.partitions(topic)],
    "topics": lambda c: c.topics(),
    "topics_being_deleted": lambda c: c.topics_being_deleted(),
    "request_counts": lambda c: c.request_counts(),
    "reset_request_counts": lambda c: c.reset_request_counts(),
    "response_bytes": lambda c: c.response_bytes(),
    "set_produce_rate": lambda c, topic, partition, bytes_per_s: c.set_produce_rate(
        topic, partition, bytes_per_s
    ),
    "create_topic": lambda c, name, assignment, configs: c.create_topic(
        name, assignment, configs=configs
    ),
    "kill_broker": lambda c, node_id: c.kill_broker(node_id),
    "pause_broker": lambda c, node_id: c.pause_broker(node_id),
    "revive_broker": lambda c, node_id: c.revive_broker(node_id),
    "set_partition_size": lambda c, topic, partition, size_bytes: c.set_partition_size(
        topic, partition, size_bytes
    ),
    "grow_partition": lambda c, topic, partition, num_bytes: c.grow_partition(
        topic, partition, num_bytes
    ),
    "set_replication_rate": lambda c, node_id, bytes_per_s: c.set_replication_rate(
        node_id, bytes_per_s
    ),
    "advance_time": lambda c, seconds: c.advance_time(seconds),
}


def _child_main(argv: Sequence[str]) -> int:
    from ._server import InProcessCluster, ManualClock

    try:
        spec = json.loads(argv[0])
        brokers = [BrokerSpec(**b) for b in spec["brokers"]]
        cluster = InProcessCluster(
            brokers,
            clock=ManualClock() if spec["manual_clock"] else time.monotonic,
            replica_lag_time_max_s=spec["replica_lag_time_max_s"],
        )
    except Exception as exc:
        print(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    with cluster:
        host, _ = cluster.address(brokers[0].node_id)
        ports = {b.node_id: cluster.address(b.node_id)[1] for b in brokers}
        print(json.dumps({"ready": True, "host": host, "ports": ports}), flush=True)
        for line in sys.stdin:  # EOF: the parent stopped us or died
            command: Any = None
            try:
                command = json.loads(line)
                op = _OPS[command["op"]]
                reply = {"ok": True, "result": op(cluster, **command.get("args", {}))}
            except ClusterCommandError as exc:
                reply = {"ok": False, "kind": type(exc).__name__, "code": exc.error_code}
                reply["error"] = str(exc)
            except Exception as exc:
                reply = {"ok": False, "kind": type(exc).__name__, "error": str(exc)}
            reply["id"] = command.get("id") if isinstance(command, dict) else None
            print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
