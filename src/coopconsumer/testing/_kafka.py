"""Apache Kafka itself as a test broker: KRaft nodes on loopback, one JVM per node.

:func:`start_kafka_cluster` formats each node's storage with the release's own
``StorageTool``, starts ``kafka.Kafka`` under ``_supervisor`` (so a JVM never outlives
the test process) and returns once every node answers Metadata listing every node.
Every node is a combined broker and controller of one static quorum
(``controller.quorum.voters``). Each has three listeners: ``CLIENT`` (what clients use,
plaintext or secured), ``INTERNAL`` (plaintext, between brokers and for the harness's
readiness probe) and ``CONTROLLER``. A single node is the ``embedded_broker("kafka")``.

One JVM per node rather than Kafka's in-JVM test kit: a node must be killable,
stoppable and pausable on its own (SIGKILL, SIGTERM, SIGSTOP), which a shared JVM cannot
give. docs/testing.md ("Apache Kafka") gives the start times and memory measured here.

Imports the standard library and sibling testing modules; never the library's own
protocol or consumer code.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import ConfigurationError, CoopConsumerError
from ._broker import BrokerKind, BrokerStartupError, EmbeddedBroker, _ManagedProcess, helper_argv
from ._kafka_dist import KafkaDistribution, KafkaSetupError, kafka_distribution
from ._ports import free_port
from ._readiness_probe import probe_api_versions, probe_broker_ids

__all__ = [
    "DEFAULT_JVM_OPTIONS",
    "KafkaCluster",
    "KafkaNode",
    "KafkaSecurity",
    "KafkaSetupError",
    "start_kafka_cluster",
]

_ADMIN_USER = "coopconsumer-admin"
_PORT_ATTEMPTS = 3
#: Kafka's graceful shutdown (controlled shutdown, log flush) gets this long after
#: SIGTERM before the JVM is killed.
_SHUTDOWN_GRACE_S = 20.0
#: JVM options of a test node, sized for a 2-core machine running several of them:
#: a small heap, the serial collector and the quick compiler (start time measured in
#: docs/testing.md); ``jvm_options=`` replaces them.
DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


@dataclass(frozen=True)
class KafkaSecurity:
    """The ``CLIENT`` listener's security: TLS files (``tls``, PEM) and/or SASL.

    ``mechanisms`` are any of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (Kafka's
    unsecured JWS validator: a client sends an unsigned token naming its principal);
    ``users`` maps names to passwords for PLAIN and SCRAM. ``client_ca`` on the TLS files
    makes the listener require client certificates (mutual TLS). ``session_lifetime_ms``
    > 0 sets ``connections.max.reauth.ms`` (KIP-368).
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None
    admin_cert: str | None = None
    admin_key: str | None = None
    mechanisms: tuple[str, ...] = ()
    users: Mapping[str, str] = field(default_factory=dict, repr=False)
    session_lifetime_ms: int = 0

    @property
    def tls(self) -> bool:
        return self.cert is not None

    @property
    def protocol(self) -> str:
        if self.mechanisms:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"


@dataclass
class KafkaNode:
    """One KRaft node (broker and controller) of a :class:`KafkaCluster`.

    ``port`` is its ``CLIENT`` listener; ``log_dirs`` its data directories (JBOD when
    more than one). Read-only for users: change a node through the cluster's methods.
    """

    node_id: int
    rack: str | None
    port: int
    internal_port: int
    controller_port: int
    directory: Path
    log_dirs: tuple[Path, ...]
    _process: _ManagedProcess | None = field(default=None, repr=False)
    _java_pid: int | None = field(default=None, repr=False)
    _paused: bool = field(default=False, repr=False)
    _earlier_output: str = field(default="", repr=False)

    @property
    def address(self) -> str:
        """``127.0.0.1:port`` of the ``CLIENT`` listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def internal_address(self) -> str:
        return f"127.0.0.1:{self.internal_port}"

    @property
    def pid(self) -> int | None:
        """PID of the node's JVM, ``None`` while it is not running."""
        return self._java_pid if self.running else None

    @property
    def running(self) -> bool:
        """True while the JVM is alive (paused counts as running)."""
        return self._process is not None and self._process.exit_status() is None

    @property
    def paused(self) -> bool:
        """True between :meth:`KafkaCluster.pause` and :meth:`KafkaCluster.resume`."""
        return self._paused and self.running

    def output_tail(self, chars: int = 4000) -> str:
        """The end of what this node logged, across its restarts."""
        current = self._process.output_tail(chars) if self._process is not None else ""
        return (self._earlier_output + current)[-chars:]


class KafkaCluster(EmbeddedBroker):
    """Apache Kafka on this host: ``len(nodes)`` KRaft nodes of one cluster.

    An :class:`EmbeddedBroker` of kind ``"kafka"`` (``bootstrap`` lists every node's
    client listener; ``create_topic`` uses Kafka's admin API), plus node control for
    failure tests: :meth:`kill` (SIGKILL), :meth:`stop_node` (SIGTERM, Kafka's controlled
    shutdown), :meth:`pause`/:meth:`resume` (SIGSTOP/SIGCONT) and :meth:`start_node`
    (the same node id, ports and data again). :meth:`run_tool` runs Kafka's own
    command-line tools of the same release against it.

    Obtained from :func:`~coopconsumer.testing.kafka_cluster` or
    ``embedded_broker("kafka")`` (one node).
    """

    kind: BrokerKind = "kafka"

    def __init__(
        self,
        *,
        distribution: KafkaDistribution,
        nodes: Sequence[KafkaNode],
        base_dir: Path,
        security: KafkaSecurity | None,
        admin_password: str,
        jvm_options: Sequence[str],
        api_versions: Mapping[int, tuple[int, int]],
    ) -> None:
        super().__init__(bootstrap=",".join(n.address for n in nodes), api_versions=api_versions)
        self._distribution = distribution
        self._nodes = {n.node_id: n for n in nodes}
        self._base_dir = base_dir
        self._security = security
        self._admin_password = admin_password
        self._jvm_options = tuple(jvm_options)
        self._stopped = False

    # --- what it is --------------------------------------------------------------

    @property
    def distribution(self) -> KafkaDistribution:
        """The Kafka release the nodes run (its jars, ``java_argv``, ``run``)."""
        return self._distribution

    @property
    def version(self) -> str:
        return self._distribution.version

    @property
    def nodes(self) -> tuple[KafkaNode, ...]:
        return tuple(self._nodes.values())

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(self._nodes)

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return self.node_ids

    def node(self, node_id: int) -> KafkaNode:
        """The node with id ``node_id``; :class:`~coopconsumer.ConfigurationError` if none."""
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ConfigurationError(
                f"no Kafka node {node_id!r}; the nodes are {list(self._nodes)}"
            ) from None

    @property
    def pid(self) -> int | None:
        return self.nodes[0].pid

    @property
    def running(self) -> bool:
        return not self._stopped and any(n.running for n in self.nodes)

    @property
    def internal_bootstrap(self) -> str:
        """Every node's plaintext ``INTERNAL`` listener (what Kafka's own tools use)."""
        return ",".join(n.internal_address for n in self.nodes)

    @property
    def client_config(self) -> dict[str, object]:
        security = self._security
        if security is None or security.protocol == "PLAINTEXT":
            return {}
        config: dict[str, object] = {"security.protocol": security.protocol.lower()}
        if security.tls:
            config["ssl.ca.location"] = security.ca
            if security.client_ca is not None:
                config["ssl.certificate.location"] = security.admin_cert
                config["ssl.key.location"] = security.admin_key
        if security.mechanisms:
            password_mechanisms = [m for m in security.mechanisms if m != "OAUTHBEARER"]
            if password_mechanisms:
                config["sasl.mechanism"] = password_mechanisms[0]
                config["sasl.username"] = _ADMIN_USER
                config["sasl.password"] = self._admin_password
            else:
                config["sasl.mechanism"] = "OAUTHBEARER"
                config["enable.sasl.oauthbearer.unsecure.jwt"] = True
                config["sasl.oauthbearer.config"] = f"principal={_ADMIN_USER}"
        return config

    def output_tail(self, chars: int = 4000) -> str:
        """Each node's log tail, headed by its id."""
        share = max(500, chars // max(1, len(self._nodes)))
        return "\n".join(
            f"--- kafka node {n.node_id} ---\n{n.output_tail(share)}" for n in self.nodes
        )

    # --- node control ------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id``'s JVM and wait until it is gone (no shutdown at all)."""
        node = self._running_node(node_id, "kill")
        assert node._java_pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(node._java_pid, signal.SIGKILL)
        self._reap(node, timeout_s=_SHUTDOWN_GRACE_S)

    def stop_node(self, node_id: int, *, timeout_s: float = _SHUTDOWN_GRACE_S) -> None:
        """Stop node ``node_id`` as an operator does (SIGTERM: controlled shutdown, leader
        moves, log flush); SIGKILL if it has not exited within ``timeout_s``."""
        node = self._running_node(node_id, "stop")
        assert node._java_pid is not None
        if node._paused:
            self.resume(node_id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(node._java_pid, signal.SIGTERM)
        if not self._reap(node, timeout_s=timeout_s):
            with contextlib.suppress(ProcessLookupError):
                os.kill(node._java_pid, signal.SIGKILL)
            self._reap(node, timeout_s=_SHUTDOWN_GRACE_S)

    def pause(self, node_id: int) -> None:
        """Freeze node ``node_id`` (SIGSTOP): its sockets stay open and answer nothing,
        as a broker in a long GC pause or on a partitioned host."""
        node = self._running_node(node_id, "pause")
        assert node._java_pid is not None
        os.kill(node._java_pid, signal.SIGSTOP)
        node._paused = True

    def resume(self, node_id: int) -> None:
        """Let a paused node run again (SIGCONT)."""
        node = self._running_node(node_id, "resume")
        assert node._java_pid is not None
        os.kill(node._java_pid, signal.SIGCONT)
        node._paused = False

    def start_node(self, node_id: int, *, timeout_s: float = 60.0) -> None:
        """Start a stopped or killed node again (same id, ports and data) and wait until
        the cluster lists it. Raises :class:`BrokerStartupError` with its log tail."""
        node = self.node(node_id)
        if node.running:
            raise ConfigurationError(f"Kafka node {node_id} is running; stop or kill it first")
        self._launch(node)
        self._wait_ready(time.monotonic() + timeout_s)

    def restart(self, node_id: int, *, timeout_s: float = 60.0) -> None:
        """:meth:`stop_node` then :meth:`start_node`."""
        self.stop_node(node_id)
        self.start_node(node_id, timeout_s=timeout_s)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until every running node answers Metadata listing every running node."""
        self._wait_ready(time.monotonic() + timeout_s)

    def run_tool(
        self, main_class: str, *args: str, timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's tools of this release (``org.apache.kafka.tools.ConfigCommand``,
        ``org.apache.kafka.tools.reassign.ReassignPartitionsCommand``, ...). Pass
        ``--bootstrap-server`` yourself (:attr:`internal_bootstrap` needs no security).
        Returns what it printed; the exit status is not checked."""
        return self._distribution.run(main_class, *args, timeout_s=timeout_s)

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after a grace) and remove their data."""
        if self._stopped:
            return
        self._stopped = True
        # A node whose supervisor never reported its JVM's pid has nothing to signal
        # here (pid 0 would be this process group): its supervisor's stop() ends it.
        running = [n for n in self.nodes if n.running and n._java_pid is not None]
        for node in running:
            assert node._java_pid is not None
            if node._paused:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node._java_pid, signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError):
                os.kill(node._java_pid, signal.SIGTERM)
        deadline = time.monotonic() + _SHUTDOWN_GRACE_S
        for node in running:
            self._reap(node, timeout_s=max(0.1, deadline - time.monotonic()))
        for node in self.nodes:
            if node._process is not None:
                node._process.stop()  # SIGKILLs what is left in its group
                node._process.discard_log()
        shutil.rmtree(self._base_dir, ignore_errors=True)

    # --- internals ---------------------------------------------------------------

    def _running_node(self, node_id: int, what: str) -> KafkaNode:
        node = self.node(node_id)
        if not node.running or node._java_pid is None:
            raise ConfigurationError(f"cannot {what} Kafka node {node_id}: it is not running")
        return node

    def _client_probe_ssl(self) -> ssl.SSLContext | None:
        """TLS for probing the CLIENT listener: it only checks that something answers
        (clients verify the broker), presenting the admin certificate under mutual TLS."""
        security = self._security
        if security is None or not security.tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if security.client_ca is not None and security.admin_cert and security.admin_key:
            context.load_cert_chain(security.admin_cert, security.admin_key)
        return context

    def _reap(self, node: KafkaNode, *, timeout_s: float) -> bool:
        """Wait for the node's supervisor to exit; True when it did."""
        process = node._process
        if process is None:
            return True
        deadline = time.monotonic() + timeout_s
        while process.exit_status() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        node._earlier_output = (node._earlier_output + process.output_tail(20_000))[-20_000:]
        process.stop()
        process.discard_log()
        node._process = None
        node._paused = False
        return True

    def _launch(self, node: KafkaNode) -> None:
        properties = node.directory / "server.properties"
        argv = helper_argv(
            "_supervisor.py",
            "--grace-s",
            str(_SHUTDOWN_GRACE_S),
            *self._distribution.java_argv(
                "kafka.Kafka", str(properties), jvm_options=self._jvm_options
            ),
        )
        env = dict(os.environ)
        env["LOG_DIR"] = str(node.directory / "logs")
        process = _ManagedProcess(argv, env=env, label=f"kafka-{node.node_id}")
        node._process = process
        try:
            header = process.read_line(60.0)
        except TimeoutError as exc:
            raise BrokerStartupError(
                f"Kafka node {node.node_id}: its supervisor did not start java within 60 s",
                stderr_tail=process.output_tail(),
            ) from exc
        if header is None:
            raise BrokerStartupError(
                f"Kafka node {node.node_id}: its supervisor exited before starting java",
                stderr_tail=process.output_tail(),
            )
        node._java_pid = int(json.loads(header)["pid"])
        node._paused = False

    def _wait_ready(self, deadline: float) -> Mapping[int, tuple[int, int]]:
        expected = {n.node_id for n in self.nodes if n.running}
        last_error = "no answer yet"
        delay = 0.05
        while True:
            for node in self.nodes:
                if node._process is not None and not node.running:
                    log = node.output_tail(1_000_000)
                    raise BrokerStartupError(
                        f"Kafka node {node.node_id} exited during start "
                        f"({node._process.exit_reason()}); its first errors:\n"
                        + _first_errors(log),
                        stderr_tail=log[-4000:],
                    )
            try:
                versions: Mapping[int, tuple[int, int]] = {}
                for node in self.nodes:
                    if not node.running:
                        continue
                    seen = probe_broker_ids(node.internal_address, timeout_s=2.0)
                    if not expected <= seen:
                        missing = sorted(expected - seen)
                        raise _NotYet(
                            f"node(s) {missing} not registered yet: node {node.node_id} "
                            f"lists {sorted(seen)}"
                        )
                    # The client listener binds on its own: a node whose INTERNAL
                    # listener answers may still be failing to bind CLIENT.
                    answered = probe_api_versions(
                        node.address, timeout_s=2.0, ssl_context=self._client_probe_ssl()
                    )
                    versions = versions or answered
                return versions
            except (CoopConsumerError, _NotYet) as exc:
                last_error = str(exc)
            if time.monotonic() >= deadline:
                raise BrokerStartupError(
                    f"Kafka did not become ready ({last_error})",
                    stderr_tail=self.output_tail(6000),
                )
            time.sleep(delay)
            delay = min(0.25, delay * 1.5)


class _NotYet(Exception):
    pass


def _first_errors(log: str, limit: int = 8) -> str:
    """The first ERROR/FATAL lines of a node's log and the line after each (where Kafka
    puts the exception): the cause, which the shutdown chatter that follows buries."""
    lines = log.splitlines()
    picked: list[str] = []
    for index, line in enumerate(lines):
        if " ERROR " in line or " FATAL " in line or line.startswith("Exception in thread"):
            picked.extend(lines[index : index + 2])
            if len(picked) >= 2 * limit:
                break
    return "\n".join(dict.fromkeys(picked)) or "(none logged; see the tail)"


def _node_properties(
    node: KafkaNode,
    voters: str,
    *,
    brokers: int,
    security: KafkaSecurity | None,
    extra: Mapping[str, str],
) -> dict[str, str]:
    client_protocol = "PLAINTEXT" if security is None else security.protocol
    replicas = min(3, brokers)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": (
            f"CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{node.internal_port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}"
        ),
        "advertised.listeners": (
            f"CLIENT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{node.internal_port}"
        ),
        "listener.security.protocol.map": (
            f"CLIENT:{client_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL",
        "log.dirs": ",".join(str(d) for d in node.log_dirs),
        # Test-broker settings (docs/testing.md, "Apache Kafka"): no join delay, internal
        # topics that fit the cluster, group timeouts tests may shorten.
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min(2, replicas)),
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min(2, replicas)),
        "group.min.session.timeout.ms": "500",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "100",
        # A restarted node cannot register while its previous registration's session
        # lives (DUPLICATE_BROKER_REGISTRATION): 9 s by default, measured as a 9-12 s
        # restart. The same timeout fences a killed node; 4 s keeps both short while
        # leaving eight heartbeats of slack on a busy machine.
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "4000",
        # Threads sized for a 2-core machine running several nodes.
        "num.network.threads": "2",
        "num.io.threads": "4",
        "background.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
    }
    if node.rack is not None:
        props["broker.rack"] = node.rack
    if security is not None:
        props.update(_security_properties(security))
    props.update(extra)
    return props


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _security_properties(security: KafkaSecurity) -> dict[str, str]:
    props: dict[str, str] = {}
    prefix = "listener.name.client."
    if security.tls:
        props[prefix + "ssl.keystore.type"] = "PEM"
        props[prefix + "ssl.keystore.location"] = str(security.cert)  # key appended, below
        if security.client_ca is not None:
            props[prefix + "ssl.client.auth"] = "required"
            props[prefix + "ssl.truststore.type"] = "PEM"
            props[prefix + "ssl.truststore.location"] = security.client_ca
        props[prefix + "ssl.endpoint.identification.algorithm"] = ""
    if security.mechanisms:
        props[prefix + "sasl.enabled.mechanisms"] = ",".join(security.mechanisms)
        for mechanism in security.mechanisms:
            lower = mechanism.lower()
            if mechanism == "PLAIN":
                users = " ".join(
                    f'user_{name}="{_jaas_quote(password)}"'
                    for name, password in security.users.items()
                )
                module = "org.apache.kafka.common.security.plain.PlainLoginModule"
                jaas = f"{module} required {users};"
            elif mechanism.startswith("SCRAM-"):
                jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            elif mechanism == "OAUTHBEARER":
                module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
                jaas = f'{module} required unsecuredLoginStringClaim_sub="{_ADMIN_USER}";'
            else:
                raise ConfigurationError(f"Kafka test listeners do not offer SASL {mechanism!r}")
            props[f"{prefix}{lower}.sasl.jaas.config"] = jaas
            if security.session_lifetime_ms > 0:
                props[f"{prefix}{lower}.connections.max.reauth.ms"] = str(
                    security.session_lifetime_ms
                )
    return props


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    path.write_text("".join(f"{key}={escape(value)}\n" for key, value in props.items()))


def _pkcs8_keystore(security: KafkaSecurity, directory: Path) -> str:
    """A PEM keystore file (unencrypted PKCS#8 key, then the certificate chain), the
    form Kafka's PEM keystore reads (KIP-651)."""
    from cryptography.hazmat.primitives import serialization

    assert security.cert is not None
    assert security.key is not None
    key = serialization.load_pem_private_key(Path(security.key).read_bytes(), password=None)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path = directory / "client-listener-keystore.pem"
    path.write_bytes(pem + Path(security.cert).read_bytes())
    return str(path)


def _format(
    distribution: KafkaDistribution,
    nodes: Sequence[KafkaNode],
    cluster_id: str,
    security: KafkaSecurity | None,
    deadline: float,
) -> None:
    scram: list[str] = []
    if security is not None:
        for mechanism in security.mechanisms:
            if mechanism.startswith("SCRAM-"):
                for name, password in security.users.items():
                    scram += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    running = []
    for node in nodes:
        argv = distribution.java_argv(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(node.directory / "server.properties"),
            *scram,
            jvm_options=("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"),
        )
        running.append(
            (
                node,
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
            )
        )
    failures = []
    for node, popen in running:
        try:
            out, _ = popen.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            popen.kill()
            out, _ = popen.communicate()
            failures.append((node, "timed out", out))
            continue
        if popen.returncode != 0:
            failures.append((node, f"exit {popen.returncode}", out))
    if failures:
        node, why, out = failures[0]
        raise BrokerStartupError(
            f"kafka-storage format failed for node {node.node_id} ({why})", stderr_tail=out[-4000:]
        )


def start_kafka_cluster(
    brokers: int = 1,
    *,
    log_dirs: int = 1,
    racks: Sequence[str | None] | None = None,
    version: str | None = None,
    security: KafkaSecurity | None = None,
    broker_config: Mapping[str, str] | None = None,
    jvm_options: Sequence[str] | None = None,
    startup_timeout_s: float = 120.0,
) -> KafkaCluster:
    """Start ``brokers`` KRaft nodes; return once every node lists every node.

    See :func:`coopconsumer.testing.kafka_cluster` for the arguments. Raises
    :class:`KafkaSetupError` when Java, Maven or the jars are missing and
    :class:`BrokerStartupError` (with the failing node's log tail) when a node cannot
    start; nothing is left running then.
    """
    if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
        raise ConfigurationError(f"brokers must be an int >= 1, not {brokers!r}")
    if isinstance(log_dirs, bool) or not isinstance(log_dirs, int) or log_dirs < 1:
        raise ConfigurationError(f"log_dirs must be an int >= 1, not {log_dirs!r}")
    if startup_timeout_s <= 0:
        raise ConfigurationError(f"startup_timeout_s must be > 0, not {startup_timeout_s!r}")
    rack_cycle: list[str | None] = list(racks) if racks else [None]
    distribution = kafka_distribution(version)
    deadline = time.monotonic() + startup_timeout_s
    failure: BrokerStartupError | None = None
    for _attempt in range(_PORT_ATTEMPTS):
        base = Path(tempfile.mkdtemp(prefix="coopconsumer-kafka-"))
        nodes = [
            KafkaNode(
                node_id=i,
                rack=rack_cycle[(i - 1) % len(rack_cycle)],
                port=free_port(),
                internal_port=free_port(),
                controller_port=free_port(),
                directory=base / f"node-{i}",
                log_dirs=tuple(base / f"node-{i}" / f"data-{d}" for d in range(log_dirs)),
            )
            for i in range(1, brokers + 1)
        ]
        cluster = KafkaCluster(
            distribution=distribution,
            nodes=nodes,
            base_dir=base,
            security=security,
            admin_password=secrets.token_urlsafe(12),
            jvm_options=DEFAULT_JVM_OPTIONS if jvm_options is None else jvm_options,
            api_versions={},
        )
        try:
            _prepare(cluster, nodes, security, broker_config or {}, deadline)
            for node in nodes:
                cluster._launch(node)
            versions = cluster._wait_ready(deadline)
            cluster._api_versions = dict(versions)
            return cluster
        except BrokerStartupError as exc:
            cluster.stop()
            if "Address already in use" not in str(exc) or time.monotonic() >= deadline:
                raise
            failure = exc  # a port taken between free_port() and the bind: new ports
        except BaseException:
            cluster.stop()
            raise
    assert failure is not None
    raise failure


def _prepare(
    cluster: KafkaCluster,
    nodes: Sequence[KafkaNode],
    security: KafkaSecurity | None,
    broker_config: Mapping[str, str],
    deadline: float,
) -> None:
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
    effective = security
    if security is not None:
        users = dict(security.users)
        users[_ADMIN_USER] = cluster._admin_password
        effective = KafkaSecurity(**{**security.__dict__, "users": users})
        cluster._security = effective
    for node in nodes:
        node.directory.mkdir(parents=True)
        (node.directory / "logs").mkdir()
        props = _node_properties(
            node, voters, brokers=len(nodes), security=effective, extra=broker_config
        )
        if effective is not None and effective.tls:
            props["listener.name.client.ssl.keystore.location"] = _pkcs8_keystore(
                effective, node.directory
            )
        _write_properties(node.directory / "server.properties", props)
    cluster_id = _cluster_id()
    _format(cluster.distribution, nodes, cluster_id, effective, deadline)


def _cluster_id() -> str:
    """16 random bytes in URL-safe base64 without padding, as ``kafka-storage
    random-uuid`` prints, without starting a JVM for it. Like Kafka's own
    ``Uuid.randomUuid`` it never starts with ``-``: ``format -t -xyz`` would read the id
    as an option and fail (1 start in 64 did)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
