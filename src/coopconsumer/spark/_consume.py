"""The consume job of ``coopconsumer.spark``, driver side: N Spark tasks, each a member.

:func:`run_consume_job` (bounded: up to the end offsets read at the start) and
:func:`start_consume_job` (long-running: until :meth:`ConsumeJob.stop`) validate the
configuration, start the control channel (``_control``), run one Spark task per member
(``_member``) in a background thread and return, or give access to, the members'
statistics. The members report while they run; :meth:`ConsumeJob.statistics` is the
driver's live view.

Imports pyspark lazily, the public ``Consumer``'s config parser and the end-offset
helper of ``_io``; never ``confluent_kafka`` itself.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._config import DEFAULT_ASSIGNMENT_STRATEGY, ConsumerConfig
from .._errors import ConfigurationError, RequestTimeoutError
from .._io._fetcher import end_offsets
from ..assignors import (
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    load_assignors,
    select_rebalance_protocol,
)
from ._control import ControlServer, MemberState
from ._local import use_this_python_locally
from ._spark_member import (
    AtLeastOnceDelivery,
    ExactlyOnce,
    MemberStats,
    Plan,
    Sink,
    TransactionalSink,
    run_task,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ConsumeJob",
    "MemberStats",
    "MemberStatus",
    "Sink",
    "TransactionalSink",
    "run_consume_job",
    "start_consume_job",
]

log = logging.getLogger("coopconsumer.spark")

#: The classic protocol's assignor setting (not set with group.protocol=consumer).
_STRATEGY: Final = "partition.assignment.strategy"
# Settings the job needs; filled in when the caller did not give them (under either
# spelling), refused when the caller gave something else (see _job_config).
_DEFAULTS: Final[dict[str, tuple[str, object]]] = {
    "partition.assignment.strategy": ("partition_assignment_strategy", "cooperative-sticky"),
    "enable.auto.commit": ("enable_auto_commit", False),
    "auto.offset.reset": ("auto_offset_reset", "earliest"),
}


def _given(config: Mapping[str, object], *names: str) -> bool:
    return any(isinstance(k, str) and k.strip() in names for k in config)


def _asks_kip848(config: Mapping[str, object]) -> bool:
    """Whether ``config`` sets ``group.protocol=consumer``, read as the parser reads it
    (case and spaces aside); any other value is the parser's to judge."""
    return any(
        isinstance(k, str)
        and k.strip() == "group.protocol"
        and isinstance(v, str)
        and v.strip().lower() == "consumer"
        for k, v in config.items()
    )


def _job_config(
    config: Mapping[str, object], *, bounded: bool = True
) -> tuple[dict[str, object], ConsumerConfig]:
    """The members' configuration: ``config`` plus the job's required settings, and
    its parse. A long-running job (``bounded=False``) takes any ``auto.offset.reset``.

    Parsed once, and the classic protocol's assignors loaded once: they are loaded
    here, to check that they rebalance cooperatively, and the parse is given the
    loaded instances, which it validates as they are (the members get the names)."""
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"config must be a mapping, not {type(config).__name__}")
    merged = dict(config)
    for key, (alias, value) in _DEFAULTS.items():
        if key != _STRATEGY and not _given(merged, key, alias):
            merged[key] = value
    alias, strategy = _DEFAULTS[_STRATEGY]
    to_parse = merged
    assignors: list[ConsumerPartitionAssignor] = []
    # With group.protocol=consumer (KIP-848) the broker assigns and every rebalance is
    # incremental: no client-side assignor is filled in (setting one is refused).
    if not _asks_kip848(merged):
        given = [k for k in merged if isinstance(k, str) and k.strip() in (_STRATEGY, alias)]
        if not given:
            merged[_STRATEGY] = strategy
            given = [_STRATEGY]
        spec = merged[given[0]]
        # None means the library's default, as in the parse.
        assignors = load_assignors(DEFAULT_ASSIGNMENT_STRATEGY if spec is None else spec)  # type: ignore[arg-type]
        to_parse = {**merged, given[0]: assignors}
    parsed = ConsumerConfig.from_mapping(to_parse)
    parsed.require_group_id()
    if parsed.enable_auto_commit:
        raise ConfigurationError(
            "the consume job commits each batch after the sink returned: "
            "enable.auto.commit must be false"
        )
    if bounded and parsed.auto_offset_reset != "earliest":
        raise ConfigurationError(
            "the consume job reads every record up to the end offsets: auto.offset.reset "
            f"must be 'earliest', not {parsed.auto_offset_reset!r}"
        )
    if parsed.kip848:
        return merged, parsed
    if select_rebalance_protocol(assignors) is not RebalanceProtocol.COOPERATIVE:
        raise ConfigurationError(
            "the consume job needs cooperative rebalancing: set "
            "partition.assignment.strategy to 'cooperative-sticky' (or assignors that all "
            "support COOPERATIVE)"
        )
    return merged, parsed


def _exactly_once(
    merged: dict[str, object],
    parsed: ConsumerConfig,
    sink: Sink | TransactionalSink,
    producer_config: Mapping[str, object] | None,
) -> ExactlyOnce:
    """The exactly-once part of the plan, checked on the driver as each task's
    ``TransactionalProcessor`` would check it (so a bad setting fails here, not in
    every task attempt). ``merged`` gets ``isolation.level=read_committed``."""
    from .._io._txn_producer import transaction_timeout_ms, transactional_producer_config

    isolation = str(merged.get("isolation.level", "read_committed")).strip().lower()
    if isolation != "read_committed":
        raise ConfigurationError(
            "an exactly-once job reads with isolation.level=read_committed (a "
            "read_uncommitted input would process records of aborted transactions)"
        )
    merged["isolation.level"] = "read_committed"
    if producer_config is not None and not isinstance(producer_config, Mapping):
        raise ConfigurationError(
            f"producer_config must be a mapping, not {type(producer_config).__name__}"
        )
    producer = dict(producer_config or {})
    given = producer.pop("transactional.id", None)
    if given is not None and (not isinstance(given, str) or not given):
        raise ConfigurationError(f"transactional.id must be a non-empty string: {given!r}")
    prefix = given or f"coopconsumer-spark-{parsed.require_group_id()}"
    # What each attempt's processor builds, with the first attempt's id.
    check = {"bootstrap.servers": merged.get("bootstrap.servers"), **producer}
    check["transactional.id"] = f"{prefix}-0-0"
    timeout_ms = transaction_timeout_ms(transactional_producer_config(check))
    if timeout_ms > parsed.max_poll_interval_ms:
        raise ConfigurationError(
            f"transaction.timeout.ms ({timeout_ms}) exceeds max.poll.interval.ms "
            f"({parsed.max_poll_interval_ms}): lower transaction.timeout.ms in "
            "producer_config (or raise max.poll.interval.ms in config)"
        )
    return ExactlyOnce(
        sink=sink,  # type: ignore[arg-type]
        producer_config=producer,
        transactional_id_prefix=prefix,
    )


def _topic_names(topics: Iterable[str] | str) -> tuple[str, ...]:
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise ConfigurationError(f"topics must be one or more topic names, not {topics!r}")
    return tuple(sorted(set(names)))


def _positive(name: str, value: object, *, integer: bool = False) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
        or value <= 0
    ):
        what = "int" if integer else "number"
        raise ConfigurationError(f"{name} must be a positive {what}: {value!r}")


@attrs.frozen(kw_only=True)
class MemberStatus:
    """One member attempt of a running consume job, as its last report showed it.

    ``state`` is ``"running"`` (reporting), ``"finished"`` (stopped and left the
    group) or ``"gone"`` (its connection to the driver closed without a last report:
    the task failed or its executor was lost; Spark runs it again as a new attempt).
    ``stats`` are its :class:`MemberStats` so far; ``records_lag`` the records after
    its positions in the partitions it owns (librdkafka's last fetch; None when not
    known) and ``generation_id`` its group generation, both as of the report
    (None/-1 in a last report); ``reported_at`` when the driver received it
    (``time.time()``).
    """

    state: MemberState
    stats: MemberStats
    records_lag: int | None
    generation_id: int
    reported_at: float


class ConsumeJob:
    """A running consume job (:func:`start_consume_job`; :func:`run_consume_job` waits
    for one). The Spark job runs in a background thread of the driver; this object
    watches and stops it. Usable as a context manager, which stops the job on exit.
    """

    def __init__(
        self,
        spark: SparkSession,
        plan: Plan,
        members: int,
        server: ControlServer,
        group_id: str,
    ) -> None:
        from pyspark import InheritableThread

        self._spark = spark
        self._plan = plan
        self._members = members
        self._server = server
        self._group_id = group_id
        self._job_group = f"coopconsumer-{group_id}-{secrets.token_hex(4)}"
        self._rows: list[tuple[Any, ...]] | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = InheritableThread(target=self._run, name=f"{self._job_group}-driver")
        self._thread.daemon = True
        self._thread.start()

    def _run(self) -> None:
        context = self._spark.sparkContext
        try:
            context.setJobGroup(
                self._job_group,
                f"coopconsumer consume job, group {self._group_id}",
                interruptOnCancel=True,
            )
            self._rows = (
                context.parallelize(range(self._members), self._members)
                .mapPartitionsWithIndex(functools.partial(run_task, self._plan))
                .collect()
            )
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    @property
    def group_id(self) -> str:
        """The consumer group the members belong to."""
        return self._group_id

    @property
    def job_group(self) -> str:
        """The Spark job group of the job's tasks (what ``cancelJobGroup`` takes)."""
        return self._job_group

    @property
    def members(self) -> int:
        """How many members (Spark tasks) the job runs."""
        return self._members

    @property
    def done(self) -> bool:
        """Whether the Spark job has ended (every member stopped, or it failed)."""
        return self._done.is_set()

    def statistics(self) -> list[MemberStatus]:
        """The members' statistics as they last reported them (every few seconds,
        between batches), by member and attempt. A member attempt that has not reported
        yet is left out. Safe to call from any thread, while the job runs or after."""
        statuses = []
        for report in self._server.board.reports():
            if not report.stats:
                continue
            stats = dict(report.stats)
            lag = stats.pop("records_lag", None)
            generation = stats.pop("generation_id", -1)
            statuses.append(
                MemberStatus(
                    state=report.state,
                    stats=MemberStats.from_dict(stats),
                    records_lag=None if lag is None else int(lag),
                    generation_id=int(generation),
                    reported_at=report.received_at,
                )
            )
        return statuses

    def stop(self, timeout_s: float = 60.0) -> DataFrame:
        """Ask every member to stop, wait for the job, return :meth:`wait`'s DataFrame.

        Each member finishes the batch in hand (its sink returns and the batch is
        committed), commits what is pending, leaves the group and reports; members
        whose tasks have not started yet stop as soon as they start. If the job has not
        ended within ``timeout_s`` (a sink that does not return), its Spark job group
        is cancelled (the tasks are killed; what they committed stands, what they
        handed to the sink without committing is delivered again to the next run) and
        ``RequestTimeoutError`` is raised. Raises the job's own failure as
        :meth:`wait` does. Idempotent once the job has ended.
        """
        self._server.request_stop()
        if not self._done.wait(timeout_s):
            self._spark.sparkContext.cancelJobGroup(self._job_group)
            self._done.wait(30.0)
            self._server.close()
            raise RequestTimeoutError(
                f"consume job of group {self._group_id}: members did not stop within "
                f"{timeout_s:.0f}s; its Spark job group {self._job_group} was cancelled"
            )
        return self.wait()

    def wait(self, timeout_s: float | None = None) -> DataFrame:
        """Wait until the job ends and return one row of :class:`MemberStats` per member
        attempt that finished, sorted by member and attempt (:attr:`MemberStats.SCHEMA`;
        already computed: using it runs nothing). A long-running job ends only after
        :meth:`stop` (from another thread) or when it fails.

        Raises ``RequestTimeoutError`` if it is still running after ``timeout_s``
        seconds (None: wait for ever; the job keeps running), and Spark's exception
        when a task failed beyond its retries (a sink exception, a bounded job's
        timeout).
        """
        if not self._done.wait(timeout_s):
            raise RequestTimeoutError(
                f"consume job of group {self._group_id} still running after {timeout_s}s"
            )
        self._server.close()
        if self._error is not None:
            raise self._error
        rows = sorted(self._rows or [], key=lambda row: (row[0], row[1]))
        return self._spark.createDataFrame(rows, schema=MemberStats.SCHEMA)

    def __enter__(self) -> ConsumeJob:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            self.stop()
            return
        try:
            self.stop()
        except Exception as error:  # the block's own exception matters more
            log.warning("consume job of group %s: stop failed: %s", self._group_id, error)

    def __repr__(self) -> str:
        state = "done" if self.done else "running"
        return f"ConsumeJob(group={self._group_id!r}, members={self._members}, {state})"


def _control_server(spark: SparkSession, host: str | None, port: int) -> ControlServer:
    """The job's control channel, listening where Spark's own driver endpoint does
    (``spark.driver.bindAddress``, advertised as ``spark.driver.host``) unless
    ``host`` names an address."""
    conf = spark.sparkContext.getConf()
    advertised = host or conf.get("spark.driver.host") or "127.0.0.1"
    bind = host or conf.get("spark.driver.bindAddress") or advertised
    token = secrets.token_urlsafe(24)
    try:
        return ControlServer(bind, port, token, advertised_host=advertised)
    except OSError as exc:
        if host is not None:
            raise ConfigurationError(f"control_host {host!r}, port {port}: {exc}") from exc
        # A driver host that is a name for a proxy or a service (Kubernetes) may not be
        # an address of this machine: listen on every interface instead.
        log.warning("consume job: cannot listen on %s (%s); listening on all interfaces", bind, exc)
        return ControlServer("", port, token, advertised_host=advertised)


def _start(
    spark: SparkSession,
    config: Mapping[str, object],
    topics: Iterable[str] | str,
    sink: Sink | TransactionalSink,
    *,
    bounded: bool,
    exactly_once: bool,
    producer_config: Mapping[str, object] | None,
    members: int | None,
    batch_size: int,
    poll_timeout_s: float,
    timeout_s: float | None,
    report_interval_s: float,
    control_host: str | None,
    control_port: int,
) -> ConsumeJob:
    merged, parsed = _job_config(config, bounded=bounded)
    names = _topic_names(topics)
    if not callable(sink):
        raise ConfigurationError(f"sink must be callable, not {sink!r}")
    _positive("batch_size", batch_size, integer=True)
    _positive("poll_timeout_s", poll_timeout_s)
    _positive("report_interval_s", report_interval_s)
    if timeout_s is not None:
        _positive("timeout_s", timeout_s)
    if members is not None:
        _positive("members", members, integer=True)
    use_this_python_locally(spark)  # the docs' local[2] examples, run from a venv
    if isinstance(control_port, bool) or not isinstance(control_port, int):
        raise ConfigurationError(f"control_port must be an int, not {control_port!r}")

    if not isinstance(exactly_once, bool):
        raise ConfigurationError(f"exactly_once must be a bool, not {exactly_once!r}")
    if not exactly_once and producer_config is not None:
        raise ConfigurationError("producer_config is for an exactly-once job (exactly_once=True)")
    transactional = _exactly_once(merged, parsed, sink, producer_config) if exactly_once else None

    from pyspark import cloudpickle

    try:
        cloudpickle.dumps(sink)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ConfigurationError(f"sink must be picklable to run on executors: {exc}") from exc

    started = time.time()
    ends = end_offsets(
        parsed.fetcher_config(), names, timeout_s=parsed.default_api_timeout_ms / 1000.0
    )
    context = spark.sparkContext
    count = members if members is not None else max(1, min(context.defaultParallelism, len(ends)))
    if count > context.defaultParallelism:
        log.warning(
            "consume job: %d members but the application has about %d task slots; the "
            "members without a slot start only when a slot is free%s",
            count,
            context.defaultParallelism,
            " (in a bounded job: after the others finished)"
            if bounded
            else " (an executor is added, or another member ends)",
        )
    server = _control_server(spark, control_host, control_port)
    try:
        plan = Plan(
            config=merged,
            topics=names,
            delivery=None
            if transactional is not None
            else functools.partial(AtLeastOnceDelivery, sink),  # type: ignore[arg-type]
            batch_size=batch_size,
            poll_timeout_s=float(poll_timeout_s),
            ends=ends if bounded else None,
            deadline=None if timeout_s is None else started + timeout_s,
            timeout_s=None if timeout_s is None else float(timeout_s),
            control=server.address,
            report_interval_s=float(report_interval_s),
            exactly_once=transactional,
        )
        log.info(
            "consume job%s: %d member(s), group %s, %d partition(s)%s",
            " (exactly-once)" if exactly_once else "",
            count,
            parsed.group_id,
            len(ends),
            f", {sum(max(0, h - lo) for lo, h in ends.values())} record(s) to the end offsets"
            if bounded
            else ", until stopped",
        )
        return ConsumeJob(spark, plan, count, server, parsed.require_group_id())
    except BaseException:
        server.close()
        raise


def run_consume_job(
    spark: SparkSession,
    config: Mapping[str, object],
    topics: Iterable[str] | str,
    sink: Sink | TransactionalSink,
    *,
    exactly_once: bool = False,
    producer_config: Mapping[str, object] | None = None,
    members: int | None = None,
    batch_size: int = 500,
    poll_timeout_s: float = 0.2,
    timeout_s: float = 600.0,
    report_interval_s: float = 2.0,
) -> DataFrame:
    """Consume ``topics`` up to their current end offsets with ``members`` Spark tasks,
    each a member of the consumer group ``config["group.id"]``; return their statistics.

    When the job starts the driver reads the end offset of every partition of
    ``topics``. Each task is a :class:`coopconsumer.Consumer` with
    ``partition.assignment.strategy=cooperative-sticky`` and
    ``enable.auto.commit=false`` (filled in when ``config`` does not set them; setting
    anything else is a ``ConfigurationError``, as is an ``auto.offset.reset`` other
    than ``earliest``). With ``group.protocol=consumer`` (KIP-848) the broker assigns
    and no assignor is filled in; its rebalances are incremental too. It consumes its
    partitions from the group's committed offsets, calls ``sink(batch)`` on the
    executor with each batch of records, and only after the
    sink returned commits the batch's offsets synchronously. Records at or past the end
    offsets are not handed to the sink and their partition is paused. A member stops
    once the group's committed offsets reached the end offsets of every partition.

    ``sink`` gets a ``list`` of confluent-kafka ``Message`` objects, exactly as
    :meth:`coopconsumer.Consumer.consume` returns them (``topic()``, ``partition()``,
    ``offset()``, ``key()``, ``value()``, ``headers()``, ``timestamp()``), at most
    ``batch_size`` of them, never empty. It must be picklable (it is shipped to the
    executors) and must return within ``max.poll.interval.ms``. What it returns is
    ignored; what it raises fails the task, and Spark retries it.

    Delivery: at-least-once; exactly once when no task fails. A batch is committed only
    after the sink returned, and offsets still waiting for a commit when a cooperative
    rebalance revokes their partitions are committed in ``on_partitions_revoked``, so a
    hand-over between live members repeats nothing. A failed task leaves the group; its
    partitions move to the other members (cooperative rebalance), and the records it
    handed to the sink without committing them are delivered again. The retried task
    (a new Python worker) rejoins and takes partitions back in a cooperative rebalance.
    Commits refused during a rebalance are retried; an error the group reports from
    ``consume()`` (e.g. a failed SyncGroup, after which the consumer rejoins) is logged
    and the member carries on, but five such errors in a row fail the task.

    Run at most as many members as the application has executor cores: tasks that do
    not get a core wait, and join after the others have finished the work. Needs a
    classic (not Spark Connect) session; executors need this package, network access
    to the brokers and to the driver (members report to it every
    ``report_interval_s`` seconds; see :func:`start_consume_job`).

    ``exactly_once=True`` makes each member a
    :class:`coopconsumer.TransactionalProcessor`: ``sink(batch, output)`` writes its
    output records with ``output.produce(topic, value, key)``, and they commit together
    with the batch's offsets in one Kafka transaction per batch, fenced by the
    member's group generation (KIP-447): a failed, retried, lost or speculative task
    attempt never makes output appear twice or go missing for ``read_committed``
    readers. The input is read ``read_committed``; ``producer_config`` configures the
    transactional producers (``bootstrap.servers`` and security keys default to
    ``config``'s; a ``transactional.id`` there is the prefix of each attempt's own id,
    ``<prefix>-<member>-<attempt>``, default ``coopconsumer-spark-<group.id>``). The
    members stop once the committed offsets reached the end offsets; records past them
    that arrive in the same batch are processed (and committed) too. docs/spark.md,
    "The exactly-once job".

    Returns a DataFrame (already computed: the job ran exactly once) with one row per
    member attempt that finished, in :attr:`MemberStats.SCHEMA`; a failed attempt has
    no row, its retry's row has ``attempt >= 1``.

    Raises ``ConfigurationError`` for invalid arguments (nothing ran), ``KafkaError`` if
    a topic does not exist, and Spark's own exception when a task failed beyond its
    retries: a sink exception, or the job timeout -- after ``timeout_s`` seconds from the
    start (a shared deadline; retries do not restart it) a member raises
    ``RequestTimeoutError`` naming the partitions whose committed offsets are short of
    the end offsets.
    """
    _positive("timeout_s", timeout_s)
    job = _start(
        spark,
        config,
        topics,
        sink,
        bounded=True,
        exactly_once=exactly_once,
        producer_config=producer_config,
        members=members,
        batch_size=batch_size,
        poll_timeout_s=poll_timeout_s,
        timeout_s=timeout_s,
        report_interval_s=report_interval_s,
        control_host=None,
        control_port=0,
    )
    return job.wait()


def start_consume_job(
    spark: SparkSession,
    config: Mapping[str, object],
    topics: Iterable[str] | str,
    sink: Sink | TransactionalSink,
    *,
    exactly_once: bool = False,
    producer_config: Mapping[str, object] | None = None,
    members: int | None = None,
    batch_size: int = 500,
    poll_timeout_s: float = 0.2,
    report_interval_s: float = 2.0,
    control_host: str | None = None,
    control_port: int = 0,
) -> ConsumeJob:
    """Start a long-running consume job: ``members`` Spark tasks, each a member of the
    consumer group ``config["group.id"]``, consume ``topics`` until
    :meth:`ConsumeJob.stop`. Returns at once; the job runs in a background thread.

    Each member is what :func:`run_consume_job` runs -- a cooperative-sticky
    :class:`coopconsumer.Consumer` that hands each batch to ``sink`` on its executor
    and commits the batch's offsets only after the sink returned -- except that it has
    no end offsets: it consumes whatever arrives, from the group's committed offsets
    (``auto.offset.reset`` for partitions without, ``earliest`` unless ``config`` says
    otherwise), until the driver tells it to stop. ``enable.auto.commit=true`` and
    assignors without COOPERATIVE support are refused (``ConfigurationError``).

    Spark's scheduling becomes the group's membership: a task that fails, or whose
    executor is lost, leaves the group (a cooperative rebalance moves only its
    partitions to the others) and Spark runs it again -- on a free slot, or when one
    appears -- where it rejoins (another cooperative rebalance). Members beyond the
    application's free task slots wait, and join when an executor is added (dynamic
    allocation requests executors for such waiting tasks). The members keep the
    partitions they own through all of these.

    Every ``report_interval_s`` seconds, between batches, each member sends its
    statistics to the driver over a TCP connection (the driver listens on
    ``control_host``, default ``spark.driver.host``, port ``control_port``, default any
    free one; executors must be able to reach it, as they reach the driver's own
    endpoints). :meth:`ConsumeJob.statistics` shows them; a member that cannot reach
    the driver keeps consuming and retries.

    Delivery is at-least-once, as in :func:`run_consume_job`: a member that fails or
    whose executor is lost delivers again, through whichever member takes its
    partitions, the records its sink took after its last commit. Stopping is graceful:
    each member finishes its batch, commits and leaves the group. With
    ``exactly_once=True`` (and ``producer_config``) the members are transactional, as
    in :func:`run_consume_job`: output and offsets commit in one transaction per batch.

    Raises ``ConfigurationError`` for invalid arguments and ``KafkaError`` if a topic
    does not exist (nothing started).
    """
    return _start(
        spark,
        config,
        topics,
        sink,
        bounded=False,
        exactly_once=exactly_once,
        producer_config=producer_config,
        members=members,
        batch_size=batch_size,
        poll_timeout_s=poll_timeout_s,
        timeout_s=None,
        report_interval_s=report_interval_s,
        control_host=control_host,
        control_port=control_port,
    )
