"""A Spark standalone cluster for tests: one master and N workers, each its own process.

Started from the installed ``pyspark`` package (its ``bin/spark-class`` and jars; no
download), loopback only, each JVM under ``_supervisor`` in its own session so it dies
with the test process. :meth:`SparkStandaloneCluster.kill_worker` takes a worker away
as a lost machine would go: the worker JVM, its executors and their Python workers are
SIGKILLed at once. Imports the standard library and the sibling testing modules only;
never pyspark itself (the cluster is driven through processes and the master's JSON
status page).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from ._broker import BrokerStartupError, _ManagedProcess, helper_argv
from ._ports import free_port

__all__ = ["SparkClusterError", "SparkStandaloneCluster", "spark_standalone_cluster"]

#: Seconds a master or worker gets between SIGTERM and SIGKILL when the cluster stops.
_GRACE_S = "2"
#: JVM options of the master, the workers and the executors: one GC thread and the C1
#: compiler only, which start a short-lived JVM with far less CPU on a small machine.
_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss4m"
_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.master.name = org.apache.spark.deploy
logger.master.level = info
"""


class SparkClusterError(BrokerStartupError):
    """The standalone cluster could not start, or did not reach the state asked for in
    time. Carries the tail of the master's and workers' output; nothing started by the
    failed call is left running."""


def spark_home() -> Path:
    """The installed pyspark package directory, which is a Spark distribution
    (``bin/spark-class``, ``jars/``). Raises :class:`SparkClusterError` without pyspark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkClusterError(
            "the Spark test cluster needs pyspark: pip install 'coopconsumer[spark]'"
        )
    home = Path(next(iter(spec.submodule_search_locations)))
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise SparkClusterError(f"pyspark at {home} has no bin/spark-class or jars/")
    return home


class _Worker:
    def __init__(self, index: int, process: _ManagedProcess, port: int) -> None:
        self.index = index
        self.process = process
        self.port = port


class SparkStandaloneCluster:
    """A running standalone master and its workers (see :func:`spark_standalone_cluster`).

    ``master_url`` is what ``SparkSession.builder.master()`` takes;
    :meth:`session_config` the settings a test session needs on this machine.
    """

    def __init__(
        self,
        *,
        workers: int,
        cores_per_worker: int,
        worker_memory: str,
        startup_timeout_s: float,
        distinct_hosts: bool = False,
    ) -> None:
        self._home = spark_home()
        self._distinct_hosts = distinct_hosts
        self._cores = cores_per_worker
        self._memory = worker_memory
        self._timeout_s = startup_timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="coopconsumer-spark-"))
        (self._dir / "conf").mkdir()
        (self._dir / "conf" / "log4j2.properties").write_text(_LOG4J)
        self._master: _ManagedProcess | None = None
        self._master_port = 0
        self._ui_port = 0
        self._workers: dict[int, _Worker] = {}
        self._count = workers

    # ------------------------------------------------------------------ properties

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        return f"spark://127.0.0.1:{self._master_port}"

    @property
    def master_ui_url(self) -> str:
        """The master's web UI (its ``/json/`` page is the cluster's state)."""
        return f"http://127.0.0.1:{self._ui_port}"

    @property
    def cores_per_worker(self) -> int:
        """Task slots each worker offers."""
        return self._cores

    @property
    def worker_indexes(self) -> tuple[int, ...]:
        """Indexes of the workers started and not killed, ascending."""
        return tuple(sorted(self._workers))

    def session_config(self) -> dict[str, str]:
        """Spark settings for a driver of this cluster: the master, loopback addresses,
        small memory, the same light JVM options as the cluster, UI off."""
        return {
            "spark.master": self.master_url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": "512m",
            "spark.executor.memory": "512m",
            "spark.driver.extraJavaOptions": _JAVA_OPTS,
            "spark.executor.extraJavaOptions": _JAVA_OPTS,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
        }

    # ------------------------------------------------------------------ lifecycle

    def worker_host(self, index: int) -> str:
        """The address worker ``index`` and its executors listen on and advertise:
        ``127.0.0.1``, or ``127.0.0.<index + 2>`` with ``distinct_hosts``."""
        return f"127.0.0.{index + 2}" if self._distinct_hosts else "127.0.0.1"

    def _env(self, host: str = "127.0.0.1") -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(self._home),
            SPARK_CONF_DIR=str(self._dir / "conf"),
            SPARK_LOCAL_IP=host,
            SPARK_LOCAL_HOSTNAME=host,
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS=_JAVA_OPTS,
            SPARK_LOG_DIR=str(self._dir / "logs"),
            PYSPARK_PYTHON=sys.executable,
        )
        for key in ("SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_WORKER_INSTANCES"):
            env.pop(key, None)
        return env

    def _spawn(self, label: str, *args: str, host: str = "127.0.0.1") -> _ManagedProcess:
        spark_class = str(self._home / "bin" / "spark-class")
        argv = helper_argv("_supervisor.py", "--grace-s", _GRACE_S, spark_class, *args)
        return _ManagedProcess(argv, env=self._env(host), label=label)

    def start(self) -> SparkStandaloneCluster:
        """Start the master and the workers; return once every worker is ALIVE."""
        deadline = time.monotonic() + self._timeout_s
        try:
            self._start_master(deadline)
            for index in range(self._count):
                self._launch_worker(index)
            self._wait_alive(len(self._workers), deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_master(self, deadline: float) -> None:
        for _ in range(3):  # a free port can be taken before the JVM binds it
            self._master_port, self._ui_port = free_port(), free_port()
            process = self._spawn(
                "spark-master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self._master_port),
                "--webui-port",
                str(self._ui_port),
            )
            self._master = process
            while time.monotonic() < deadline:
                state = self._state()
                if state is not None and state.get("status") == "ALIVE":
                    return
                if process.exit_status() is not None:
                    break
                time.sleep(0.2)
            else:
                raise SparkClusterError(
                    f"the Spark master did not come up within {self._timeout_s:.0f}s",
                    stderr_tail=self.output_tail(),
                )
            process.stop()
        raise SparkClusterError(
            "the Spark master exited at startup three times", stderr_tail=self.output_tail()
        )

    def _launch_worker(self, index: int) -> None:
        work = self._dir / f"worker-{index}"
        work.mkdir(exist_ok=True)
        port = free_port()
        host = self.worker_host(index)
        process = self._spawn(
            f"spark-worker-{index}",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            host,
            "--port",
            str(port),
            "--webui-port",
            "0",
            "--cores",
            str(self._cores),
            "--memory",
            self._memory,
            "--work-dir",
            str(work),
            self.master_url,
            host=host,
        )
        self._workers[index] = _Worker(index, process, port)

    def start_worker(self, index: int, *, timeout_s: float | None = None) -> None:
        """Start worker ``index`` again (after :meth:`kill_worker`), or a new one; return
        once the master lists it ALIVE. Raises :class:`SparkClusterError` on timeout."""
        if index in self._workers:
            raise ConfigurationError(f"worker {index} is running")
        self._launch_worker(index)
        wait = self._timeout_s if timeout_s is None else timeout_s
        self._wait_alive(len(self._workers), time.monotonic() + wait)

    def kill_worker(self, index: int) -> list[int]:
        """Take worker ``index`` away as a lost machine goes: SIGKILL its JVM, its
        executors and their Python workers (every process descending from it), without
        any shutdown hook. Returns the pids killed. The master and the drivers notice
        when their connections break."""
        worker = self._workers.pop(index, None)
        if worker is None:
            raise ConfigurationError(f"no running worker {index}")
        root = worker.process.pid
        doomed = [root, *_descendants(root)]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        worker.process.stop()
        worker.process.discard_log()
        return doomed

    def worker_pids(self, index: int) -> list[int]:
        """Every live process of worker ``index``: its supervisor, JVM, executors and
        their Python workers."""
        root = self._workers[index].process.pid
        return [root, *_descendants(root)]

    def wait_for_executors(self, spark: Any, count: int, *, timeout_s: float = 180.0) -> None:
        """Wait until the application of ``spark`` (a SparkSession) has ``count``
        executors registered. Raises :class:`SparkClusterError` on timeout."""
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
        deadline = time.monotonic() + timeout_s
        while (have := int(status().size()) - 1) < count:  # the driver is listed too
            if time.monotonic() >= deadline:
                raise SparkClusterError(
                    f"{have} of {count} executors registered within {timeout_s:.0f}s",
                    stderr_tail=self.output_tail(),
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the workers and the master and remove the cluster's files; idempotent."""
        for worker in list(self._workers.values()):
            worker.process.stop()
            worker.process.discard_log()
        self._workers.clear()
        if self._master is not None:
            self._master.stop()
            self._master.discard_log()
            self._master = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SparkStandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ state

    def _state(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.master_ui_url}/json/", timeout=5) as answer:
                state: dict[str, Any] = json.loads(answer.read())
                return state
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def state(self) -> dict[str, Any]:
        """The master's ``/json/`` status: ``workers`` (id, host, port, state, cores,
        coresused), ``activeapps``, ``status``. Raises :class:`SparkClusterError` when the
        master does not answer."""
        state = self._state()
        if state is None:
            raise SparkClusterError(
                "the Spark master does not answer", stderr_tail=self.output_tail()
            )
        return state

    def alive_workers(self) -> int:
        """How many of this cluster's running workers the master lists ALIVE."""
        state = self._state() or {}
        ports = {w.port for w in self._workers.values()}
        return sum(
            1
            for w in state.get("workers", [])
            if w.get("state") == "ALIVE" and w.get("port") in ports
        )

    def _wait_alive(self, count: int, deadline: float) -> None:
        while self.alive_workers() < count:
            for worker in self._workers.values():
                if worker.process.exit_status() is not None:
                    raise SparkClusterError(
                        f"Spark worker {worker.index} exited at startup",
                        stderr_tail=self.output_tail(),
                    )
            if time.monotonic() >= deadline:
                raise SparkClusterError(
                    f"{count} Spark worker(s) not ALIVE within {self._timeout_s:.0f}s",
                    stderr_tail=self.output_tail(),
                )
            time.sleep(0.2)

    def output_tail(self, chars: int = 3000) -> str:
        """The end of the master's and every worker's output, labelled."""
        parts = []
        if self._master is not None:
            parts.append(f"--- master ---\n{self._master.output_tail(chars)}")
        for worker in self._workers.values():
            parts.append(f"--- worker {worker.index} ---\n{worker.process.output_tail(chars)}")
        return "\n".join(parts)


def _descendants(root: int) -> list[int]:
    """Every process below ``root``, from /proc (Linux), parents before children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after it.
        fields = stat[stat.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    queue = [root]
    while queue:
        pid = queue.pop(0)
        for child in children.get(pid, []):
            found.append(child)
            queue.append(child)
    return found


@contextmanager
def spark_standalone_cluster(
    workers: int = 2,
    *,
    cores_per_worker: int = 2,
    worker_memory: str = "1g",
    startup_timeout_s: float = 180.0,
    distinct_hosts: bool = False,
) -> Iterator[SparkStandaloneCluster]:
    """Start a Spark standalone master and ``workers`` workers from the installed
    pyspark package, each a separate process on loopback; stop them when the block ends.

    Each worker offers ``cores_per_worker`` task slots and ``worker_memory`` for
    executors. With ``distinct_hosts`` worker ``i`` and its executors listen on
    ``127.0.0.<i + 2>`` (another loopback address, so another host to Spark: it
    launches a speculative copy of a task only on a host where no attempt of it ran).
    Startup waits until the master lists every worker ALIVE, at most
    ``startup_timeout_s`` (JVMs start slowly on a busy machine). Needs Java 17+ and
    ``pip install 'coopconsumer[spark]'``; Linux (worker kills walk ``/proc``)::

        with spark_standalone_cluster(workers=2) as cluster:
            builder = SparkSession.builder
            for key, value in cluster.session_config().items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            ...
            cluster.kill_worker(1)   # a lost machine: its tasks are rescheduled
            cluster.start_worker(1)  # and it comes back

    Set ``PYSPARK_PYTHON`` to the interpreter the executors should run before the
    session starts. Raises :class:`SparkClusterError` when the cluster cannot start
    (nothing is left running) and :class:`~coopconsumer.ConfigurationError` for bad
    arguments.
    """
    for name, value in (("workers", workers), ("cores_per_worker", cores_per_worker)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be an int >= 1, not {value!r}")
    cluster = SparkStandaloneCluster(
        workers=workers,
        cores_per_worker=cores_per_worker,
        worker_memory=worker_memory,
        startup_timeout_s=startup_timeout_s,
        distinct_hosts=distinct_hosts,
    ).start()
    with cluster:
        yield cluster
