"""The running-broker handle shared by every broker kind, and process plumbing.

``EmbeddedBroker`` is the public object; ``_ManagedProcess`` starts a helper process in
its own session, keeps its stderr in a log file and kills its whole process group on
stop, with an atexit safety net. Imports the standard library, ``coopconsumer._errors``
and (lazily, for topic creation only) ``confluent_kafka.admin``; never the library's own
protocol or consumer code, which these brokers exist to test.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from .._errors import BrokerConnectionError, ConfigurationError, CoopConsumerError
from ._readiness_probe import probe_api_versions

__all__ = [
    "BrokerKind",
    "BrokerStartupError",
    "EmbeddedBroker",
    "MockRequest",
    "external_broker",
]

#: What serves an :class:`EmbeddedBroker`: Apache Kafka (KRaft nodes from Maven Central),
#: the Tansu binary, librdkafka's mock cluster, or an already-running cluster wrapped by
#: :func:`external_broker`.
BrokerKind = Literal["kafka", "tansu", "mock", "external"]

_STOP_GRACE_S = 5.0
_TAIL_CHARS = 4000


class BrokerStartupError(CoopConsumerError):
    """A test broker could not be started or did not answer ApiVersions in time.

    ``stderr_tail`` holds the end of the broker's output (empty when it never ran).
    Nothing is left running when this is raised.
    """

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        text = message
        if stderr_tail.strip():
            text += "\n--- broker output (tail) ---\n" + stderr_tail.rstrip()
        super().__init__(text)
        self.stderr_tail = stderr_tail


class MockRequest(NamedTuple):
    """One request the mock cluster received while request tracking was on."""

    broker_id: int
    api_key: int


def _require_int(value: object, what: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{what} must be an int, not {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{what} must be >= {minimum}, not {value}")
    return value


def _require_topic(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > 249:
        raise ConfigurationError(f"topic name must be a non-empty str of <= 249 chars: {name!r}")
    if name in (".", "..") or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name):
        raise ConfigurationError(f"topic name {name!r} may only contain [a-zA-Z0-9._-]")
    return name


class EmbeddedBroker:
    """A running Kafka-protocol broker for tests: where it is and what it can do.

    Obtained from :func:`embedded_broker` (``kind`` ``"kafka"``, ``"tansu"`` or
    ``"mock"``), :func:`kafka_cluster` (``"kafka"``) or :func:`external_broker`
    (``kind`` ``"external"``). ``bootstrap`` is the value for ``bootstrap.servers`` (a
    comma-separated list when the cluster has several brokers).
    ``api_versions`` is what the first broker answered to ApiVersions v0 at startup.

    Fault injection (``set_broker_down`` and the other ``set_*``/``push_*`` methods)
    exists only on the mock cluster (``supports_faults`` is true); on other kinds those
    methods raise :class:`NotImplementedError` naming the capability, and change
    nothing.
    """

    kind: BrokerKind
    #: Whether the fault-injection methods work on this broker.
    supports_faults: bool = False

    def __init__(self, *, bootstrap: str, api_versions: Mapping[int, tuple[int, int]]) -> None:
        self._bootstrap = bootstrap
        self._api_versions = dict(api_versions)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} kind={self.kind!r} bootstrap={self.bootstrap!r}>"

    @property
    def bootstrap(self) -> str:
        """``host:port[,host:port...]`` for the client's ``bootstrap.servers``."""
        return self._bootstrap

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """API key -> ``(min_version, max_version)`` as advertised at startup."""
        return dict(self._api_versions)

    @property
    def client_config(self) -> dict[str, object]:
        """Security keys (librdkafka's names) a client needs to talk to this broker:
        empty for a plaintext broker; ``security.protocol``, ``ssl.ca.location`` and
        the SASL credentials of its admin user for a secured one."""
        return {}

    @property
    def pid(self) -> int | None:
        """PID of the process serving the broker, or ``None`` for an external one."""
        return None

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Broker ids the fault-injection methods accept.

        ``1..num_brokers`` on the mock; empty on kinds without fault injection.
        """
        return ()

    @property
    def running(self) -> bool:
        """True until the broker has been stopped (always true for an external one)."""
        return True

    def output_tail(self, chars: int = _TAIL_CHARS) -> str:
        """The last ``chars`` characters the broker process logged ("" if none)."""
        return ""

    def stop(self) -> None:
        """Stop the broker and wait until its processes are gone; idempotent.

        :func:`embedded_broker` calls this on exit; an external broker is left running.
        """

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        timeout_s: float = 15.0,
    ) -> None:
        """Create topic ``name`` and return once the broker's metadata lists it and the
        leader of each of its partitions answers for it (a ListOffsets).

        Raises :class:`~coopconsumer.KafkaError` when the broker refuses (an existing
        topic included), :class:`~coopconsumer.ConfigurationError` for a bad argument.
        """
        _require_topic(name)
        _require_int(partitions, "partitions", minimum=1)
        _require_int(replication_factor, "replication_factor", minimum=1)
        _admin_create_topic(
            self.bootstrap,
            name,
            partitions,
            replication_factor,
            timeout_s,
            self.client_config,
        )

    # --- fault injection: the mock cluster only -------------------------------------

    def _no_faults(self, what: str) -> NotImplementedError:
        return NotImplementedError(
            f"{what}: fault injection needs kind='mock' (this broker is kind={self.kind!r})"
        )

    def set_broker_down(self, broker_id: int) -> None:
        """Disconnect broker ``broker_id`` (``-1``: all) and refuse new connections.

        Partition leadership does not move.
        """
        raise self._no_faults("set_broker_down")

    def set_broker_up(self, broker_id: int) -> None:
        """Let broker ``broker_id`` (``-1``: all) accept connections again."""
        raise self._no_faults("set_broker_up")

    def set_broker_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of broker ``broker_id`` (``-1``: all) by ``rtt_ms``."""
        raise self._no_faults("set_broker_rtt")

    def push_request_errors(self, api_key: int, codes: Sequence[int]) -> None:
        """Make the next ``len(codes)`` requests with ``api_key`` fail, in order.

        Code ``0`` lets that request through; librdkafka's ``-195`` (``_TRANSPORT``)
        makes the broker drop the connection instead of answering.
        """
        raise self._no_faults("push_request_errors")

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still queued for ``api_key``."""
        raise self._no_faults("clear_request_errors")

    def set_coordinator(self, group_id: str, broker_id: int) -> None:
        """Make broker ``broker_id`` the group coordinator of ``group_id``."""
        raise self._no_faults("set_coordinator")

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader of ``topic``/``partition`` (``-1``: leaderless)."""
        raise self._no_faults("set_partition_leader")

    def set_topic_error(self, topic: str, code: int) -> None:
        """Report error ``code`` for ``topic`` in Metadata responses (``0`` clears)."""
        raise self._no_faults("set_topic_error")

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """Set the broker's ``group.initial.rebalance.delay.ms`` (the mock's default is 3000)."""
        raise self._no_faults("set_group_initial_rebalance_delay_ms")

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Change the version range advertised for ``api_key`` (``-1, -1`` removes it)."""
        raise self._no_faults("set_api_version")

    def start_request_tracking(self) -> None:
        """Start recording every request the cluster receives (see :meth:`requests`)."""
        raise self._no_faults("start_request_tracking")

    def stop_request_tracking(self) -> None:
        """Stop recording requests; what was recorded stays until cleared."""
        raise self._no_faults("stop_request_tracking")

    def requests(self) -> list[MockRequest]:
        """The requests recorded since tracking started or was last cleared, in order."""
        raise self._no_faults("requests")

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        raise self._no_faults("clear_requests")


class _ExternalBroker(EmbeddedBroker):
    kind: BrokerKind = "external"

    def __init__(
        self,
        *,
        bootstrap: str,
        api_versions: Mapping[int, tuple[int, int]],
        client_config: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(bootstrap=bootstrap, api_versions=api_versions)
        self._client_config = dict(client_config or {})

    @property
    def client_config(self) -> dict[str, object]:
        return dict(self._client_config)


def external_broker(
    bootstrap: str,
    *,
    timeout_s: float = 30.0,
    client_config: Mapping[str, object] | None = None,
) -> EmbeddedBroker:
    """Wrap an already-running cluster (a real Kafka, testcontainers, ...) for tests.

    Waits until the first bootstrap address answers ApiVersions v0, then returns an
    :class:`EmbeddedBroker` of kind ``"external"`` (no fault injection; nothing to
    stop). Raises :class:`BrokerStartupError` when it does not answer in ``timeout_s``.
    ``client_config`` holds the security keys its clients need (``security.protocol``,
    ``ssl.*``, ``sasl.*``): the harness uses them itself (the readiness probe speaks TLS
    when asked to, ``create_topic`` authenticates) and ``client_config`` returns them.
    """
    addresses = [part.strip() for part in bootstrap.split(",") if part.strip()]
    if not addresses:
        raise ConfigurationError(f"empty bootstrap {bootstrap!r}")
    deadline = time.monotonic() + timeout_s
    probe_ssl: ssl.SSLContext | None = None
    protocol = str((client_config or {}).get("security.protocol", "plaintext")).lower()
    if protocol in ("ssl", "sasl_ssl"):
        # The probe only checks that something answers; clients verify the broker.
        probe_ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        probe_ssl.check_hostname = False
        probe_ssl.verify_mode = ssl.CERT_NONE
    while True:
        try:
            versions = probe_api_versions(
                addresses[0], timeout_s=min(5.0, timeout_s), ssl_context=probe_ssl
            )
        except CoopConsumerError as exc:
            if time.monotonic() >= deadline:
                raise BrokerStartupError(
                    f"external broker {addresses[0]} did not answer ApiVersions: {exc}"
                ) from exc
            time.sleep(0.2)
            continue
        return _ExternalBroker(
            bootstrap=",".join(addresses), api_versions=versions, client_config=client_config
        )


def _admin_create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    timeout_s: float,
    client_config: Mapping[str, object] | None = None,
) -> None:
    # confluent_kafka is imported here only: the test harness uses the real admin
    # client so that topic creation never depends on the library's own wire code.
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    from .._errors import KafkaError, RequestTimeoutError

    def as_kafka_error(exc: KafkaException, what: str) -> KafkaError:
        error = exc.args[0]
        return KafkaError(
            error.code(),
            error.name(),
            retriable=bool(error.retriable()),
            message=f"{what}: {error.str()}",
            broker=bootstrap,
        )

    conf: dict[str, Any] = dict(client_config or {})
    conf.update({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    admin = AdminClient(conf)
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as exc:
        raise as_kafka_error(exc, f"create_topic({name!r})") from exc
    except TimeoutError as exc:
        raise RequestTimeoutError(
            f"create_topic({name!r}) got no answer within {timeout_s} s", broker=bootstrap
        ) from exc
    deadline = time.monotonic() + timeout_s
    while True:
        # All topics, not list_topics(topic=name): a per-topic Metadata request could
        # auto-create the topic on brokers that allow it and hide a failure.
        try:
            topics = admin.list_topics(timeout=max(1.0, deadline - time.monotonic())).topics
        except KafkaException as exc:
            raise as_kafka_error(exc, f"metadata after create_topic({name!r})") from exc
        meta = topics.get(name)
        listed = meta is not None and meta.error is None and len(meta.partitions) == partitions
        if listed and _leaders_answer(admin, name, partitions):
            return
        if time.monotonic() >= deadline:
            seen = None if meta is None else (meta.error, len(meta.partitions))
            raise BrokerConnectionError(
                f"topic {name!r} created but metadata never showed {partitions} partitions "
                f"whose leaders answer ListOffsets (last seen: {seen})",
                broker=bootstrap,
            )
        time.sleep(0.05)


def _leaders_answer(admin: Any, name: str, partitions: int) -> bool:
    """Whether every partition's leader answers a ListOffsets for it. Apache Kafka lists
    a new partition's leader in its metadata before that broker has loaded the log, and
    answers NOT_LEADER_OR_FOLLOWER until it has (seen at load on one KRaft node: a test
    reading the new topic's watermarks at once failed on it)."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    wanted = {TopicPartition(name, p): latest for p in range(partitions)}
    try:
        for future in admin.list_offsets(wanted, request_timeout=5.0).values():
            future.result(timeout=10.0)
    except (KafkaException, TimeoutError):
        return False
    return True


# --- process plumbing -------------------------------------------------------------

_live: set[_ManagedProcess] = set()
_live_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _live_lock:
        remaining = list(_live)
    for process in remaining:
        process.stop()
        process.discard_log()


atexit.register(_stop_all_at_exit)


class _ManagedProcess:
    """A helper process in its own session, speaking JSON lines on stdin/stdout.

    stderr goes to a temporary log file (a pipe nobody reads could fill and block the
    broker). ``stop()`` closes stdin (the helpers exit on EOF), then signals the whole
    process group, so grandchildren (the Tansu binary under the supervisor) go too.
    """

    def __init__(self, argv: list[str], *, env: Mapping[str, str], label: str) -> None:
        self.label = label
        # An unnamed temporary file: nothing is left behind even when this process is
        # SIGKILLed. The child shares its file offset, so the tail is read with pread.
        self._log: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115 - closed in discard_log()
            prefix=f"coopconsumer-{label}-", suffix=".log"
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._stopped = False
        self._next_id = 0
        self._popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=dict(env),
            start_new_session=True,
        )
        with _live_lock:
            _live.add(self)
        threading.Thread(target=self._pump, name=f"{label}-stdout", daemon=True).start()

    def _pump(self) -> None:
        stdout = self._popen.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                self._lines.put(raw.decode(errors="replace"))
        except (OSError, ValueError):
            pass  # the pipe broke: same as EOF for the reader
        finally:
            self._lines.put(None)
            stdout.close()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def exit_status(self) -> int | None:
        return self._popen.poll()

    def exit_reason(self) -> str | None:
        """``None`` while running, else why it is not (for startup error messages)."""
        status = self._popen.poll()
        return None if status is None else f"{self.label} exited with status {status}"

    def read_line(self, timeout_s: float) -> str | None:
        """Next stdout line; ``None`` at EOF. Raises TimeoutError."""
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(f"{self.label}: no output within {timeout_s} s") from None

    def request(self, command: Mapping[str, object], timeout_s: float) -> dict[str, Any] | None:
        """Send one JSON command and return its JSON answer; ``None`` once the child is gone.

        Commands carry an ``id`` the child echoes, so an answer that arrives after its
        request timed out is skipped instead of being taken for the next one's.
        Serialised between threads. Raises TimeoutError.
        """
        with self._lock:
            stdin = self._popen.stdin
            if self._stopped or stdin is None:
                return None
            self._next_id += 1
            request_id = self._next_id
            try:
                stdin.write(json.dumps({**command, "id": request_id}).encode() + b"\n")
                stdin.flush()
            except (BrokenPipeError, ValueError):
                return None
            deadline = time.monotonic() + timeout_s
            while True:
                line = self.read_line(max(0.0, deadline - time.monotonic()))
                if line is None:
                    return None
                try:
                    answer: dict[str, Any] = json.loads(line)
                except ValueError:
                    continue  # not a protocol line (a library printing to stdout)
                if isinstance(answer, dict) and answer.get("id") == request_id:
                    return answer

    def output_tail(self, chars: int = _TAIL_CHARS) -> str:
        try:
            fd = self._log.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - chars)
            return os.pread(fd, size - start, start).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def stop(self) -> None:
        """Stop the process group and wait for it; idempotent, never raises."""
        with _live_lock:
            if self._stopped:
                return
            self._stopped = True
            _live.discard(self)
        if self._popen.stdin is not None:
            with contextlib.suppress(OSError):
                self._popen.stdin.close()
        try:
            self._popen.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(_STOP_GRACE_S)
        # Whatever is still in the group (a broker its supervisor could not stop) dies.
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(_STOP_GRACE_S)

    def discard_log(self) -> None:
        """Close the log; ``output_tail()`` returns "" from now on."""
        self._log.close()

    def _signal_group(self, signum: int) -> None:
        # start_new_session=True made the child a session and group leader.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, signum)


def helper_argv(script: str, *args: str) -> list[str]:
    """argv running the standard-library-only helper ``script`` (a file in this package).

    Run by path rather than ``-m`` so the child does not need coopconsumer importable
    (or import it at all); ``-P`` (3.11+) keeps this directory, whose private module
    names could shadow others, off the child's ``sys.path``.
    """
    return [sys.executable, "-P", str(Path(__file__).with_name(script)), *args]
