"""The public face of the replication test cluster, whichever process serves it.

:class:`ReplicationCluster` is what :func:`coopconsumer.testing.replication_cluster`
yields: the in-process server (``_server.InProcessCluster``) or a proxy for one in a
child process (``_process.SubprocessCluster``). Both implement these methods; tests
written against this class run unchanged on either.

Imports the standard library and ``_model`` (value types) only.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping, Sequence

from ..._errors import CoopConsumerError
from ._model import BrokerView, Outcome, PartitionView

__all__ = ["ClusterCommandError", "ReplicationCluster"]


class ClusterCommandError(CoopConsumerError):
    """A test-side change to the cluster was refused (unknown topic, dead broker...).

    ``error_code`` is the Kafka error code the model answered; nothing was changed.
    """

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message or f"error code {outcome.error_code}")
        self.error_code = outcome.error_code


class ReplicationCluster(abc.ABC):
    """A running multi-broker test cluster (docs/admin.md, "The replication test
    cluster").

    Start it with :func:`coopconsumer.testing.replication_cluster`. ``bootstrap`` lists
    every broker. The change methods raise :class:`ClusterCommandError` when the model
    refuses (and then change nothing). After :meth:`stop` every port is closed.
    """

    # ------------------------------------------------------------------ lifecycle

    @abc.abstractmethod
    def stop(self) -> None:
        """Close every port and stop serving (idempotent)."""

    def __enter__(self) -> ReplicationCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} brokers={self.broker_ids} bootstrap={self.bootstrap!r}>"

    # ------------------------------------------------------------------ reading

    @property
    @abc.abstractmethod
    def bootstrap(self) -> str:
        """``host:port,...`` of every broker, for ``bootstrap.servers``."""

    @property
    @abc.abstractmethod
    def broker_ids(self) -> tuple[int, ...]:
        """Every broker's id, dead ones included."""

    @abc.abstractmethod
    def address(self, node_id: int) -> tuple[str, int]:
        """Where broker ``node_id`` listens (also while it is dead)."""

    @property
    @abc.abstractmethod
    def now(self) -> float:
        """Seconds since the cluster started, on its clock."""

    @property
    @abc.abstractmethod
    def unclean_elections(self) -> int:
        """Unclean leader elections so far."""

    @abc.abstractmethod
    def brokers(self) -> list[BrokerView]:
        """Every broker's state, by id."""

    @abc.abstractmethod
    def partition(self, topic: str, partition: int) -> PartitionView:
        """A snapshot of one partition (``ClusterCommandError`` if unknown)."""

    @abc.abstractmethod
    def partitions(self, topic: str) -> list[PartitionView]:
        """Snapshots of a topic's partitions (``ClusterCommandError`` if unknown)."""

    @abc.abstractmethod
    def topics(self) -> list[str]:
        """Every topic, sorted."""

    @abc.abstractmethod
    def topics_being_deleted(self) -> dict[str, list[tuple[int, int]]]:
        """Deleted topics with replicas still to delete on brokers that are down:
        name -> ``(partition, broker)`` pairs (the controller's queued close-replica requests)."""

    @abc.abstractmethod
    def request_counts(self) -> dict[str, int]:
        """Requests served since the start (or the last :meth:`reset_request_counts`),
        by request name (``"MetadataRequest"``...), every broker together."""

    @abc.abstractmethod
    def response_bytes(self) -> dict[str, int]:
        """Bytes of the responses sent since the same moment, by request name."""

    @abc.abstractmethod
    def reset_request_counts(self) -> None:
        """Start counting requests (and response bytes) from zero."""

    # ------------------------------------------------------------------ changing

    @abc.abstractmethod
    def create_topic(
        self,
        name: str,
        assignment: Sequence[Sequence[int]],
        *,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic directly (no wire): partition ``i`` on ``assignment[i]``."""

    @abc.abstractmethod
    def kill_broker(self, node_id: int) -> None:
        """The broker dies: its port closes, its replicas go offline, leaderships move."""

    @abc.abstractmethod
    def pause_broker(self, node_id: int) -> None:
        """The broker stalls: it answers nothing and fetches nothing until revived."""

    @abc.abstractmethod
    def revive_broker(self, node_id: int) -> None:
        """A dead or paused broker returns (same port, the bytes it had)."""

    @abc.abstractmethod
    def set_partition_size(self, topic: str, partition: int, size_bytes: int) -> None:
        """The leader (and the in-sync followers that can fetch) now hold
        ``size_bytes``."""

    @abc.abstractmethod
    def grow_partition(self, topic: str, partition: int, num_bytes: int) -> None:
        """Append ``num_bytes`` with acks=all (``ClusterCommandError`` when not
        acknowledged, e.g. NOT_ENOUGH_REPLICAS)."""

    @abc.abstractmethod
    def set_replication_rate(self, node_id: int, bytes_per_s: float) -> None:
        """How fast broker ``node_id``'s followers copy, all together."""

    @abc.abstractmethod
    def set_produce_rate(self, topic: str, partition: int, bytes_per_s: float) -> None:
        """Producers write ``bytes_per_s`` to the partition with acks=all from now on
        (0 stops them); a follower slower than that falls out of the ISR."""

    @abc.abstractmethod
    def advance_time(self, seconds: float) -> None:
        """Move a manual clock forward (``ConfigurationError`` on a real clock)."""

    def wait_for(
        self, predicate: Callable[[ReplicationCluster], bool], *, timeout_s: float = 10.0
    ) -> None:
        """Poll ``predicate(self)`` until true; ``TimeoutError`` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout_s} s")
            time.sleep(0.01)
