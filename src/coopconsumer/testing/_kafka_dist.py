"""Apache Kafka's jars, resolved from Maven Central by Maven into a per-version cache.

:func:`kafka_distribution` writes a small pom naming ``org.apache.kafka:kafka_2.13`` and
``org.apache.kafka:kafka-tools``, runs ``mvn dependency:copy-dependencies`` once per
version, adds the slf4j binding that Kafka's release tarball carries but no POM names,
and writes the logging configuration the broker and tools run with. Concurrent test
workers share the cache: one resolves under a file lock, the others wait for it.

Standard library only (plus ``coopconsumer._errors`` through ``_broker``); nothing here
talks to a broker. docs/testing.md ("Apache Kafka") describes the cache and the knobs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._broker import BrokerStartupError

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_VERSION_ENV",
    "KafkaDistribution",
    "KafkaSetupError",
    "kafka_distribution",
]

#: The Kafka release the harness runs unless ``COOPCONSUMER_KAFKA_VERSION`` names another:
#: the newest 4.x that resolved from Maven Central with its dependencies.
DEFAULT_KAFKA_VERSION = "4.4.0"
#: Environment variable naming the Kafka version to run (``3.9.2``, ``4.0.0``, ...).
KAFKA_VERSION_ENV = "COOPCONSUMER_KAFKA_VERSION"
#: Environment variable naming the cache root (default ``$XDG_CACHE_HOME`` or
#: ``~/.cache``, then ``coopconsumer/kafka/<version>``).
CACHE_DIR_ENV = "COOPCONSUMER_CACHE_DIR"

_MIN_JAVA = 17
_MVN_TIMEOUT_S = 900.0
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+([.-][A-Za-z0-9.-]+)?$")
_COMPLETE = ".complete"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <!-- Written by coopconsumer.testing: the jars of one Apache Kafka release. -->
  <groupId>coopconsumer.testing</groupId>
  <artifactId>kafka-{version}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

# log4j2 (Kafka >= 4.0): the broker's own lines at INFO, the configuration dumps and
# per-segment chatter at WARN so that a test's log tail shows what happened.
_LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.kafkaconfig.name = kafka.server.KafkaConfig
logger.kafkaconfig.level = WARN
logger.log.name = kafka.log
logger.log.level = WARN
logger.storage.name = org.apache.kafka.storage
logger.storage.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
"""

# reload4j (Kafka 3.x): the same levels in log4j 1 syntax.
_LOG4J1 = """log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN
log4j.logger.kafka.server.KafkaConfig=WARN
log4j.logger.kafka.log=WARN
log4j.logger.org.apache.kafka.storage=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.common.utils.AppInfoParser=WARN
"""


class KafkaSetupError(BrokerStartupError):
    """Apache Kafka cannot be run here: no ``java`` or ``mvn`` on PATH, a Java older than
    17, or Maven could not resolve the jars. The message says which and what to do;
    nothing is left running and a half-written cache is removed."""


@dataclass(frozen=True)
class KafkaDistribution:
    """One Apache Kafka release on this machine: its jars and how to run them.

    ``libs`` holds ``kafka_2.13``, ``kafka-tools`` and ``kafka-clients`` with every
    dependency and an slf4j binding; ``log_config`` is the logging configuration that
    :meth:`java_argv` passes to the JVM.
    """

    version: str
    libs: Path
    java: str
    log_config: Path

    @property
    def major(self) -> int:
        """The release's major version (3 or 4)."""
        return int(self.version.split(".", 1)[0])

    @property
    def classpath(self) -> str:
        """The JVM classpath of every jar in :attr:`libs`."""
        return str(self.libs / "*")

    def jar(self, artifact: str) -> Path:
        """The jar of ``artifact`` (``"kafka-clients"``, ``"slf4j-api"``, ...) in
        :attr:`libs`. Raises :class:`KafkaSetupError` when there is none."""
        pattern = re.compile(rf"^{re.escape(artifact)}-\d[^/]*\.jar$")
        for path in sorted(self.libs.iterdir()):
            if pattern.match(path.name):
                return path
        raise KafkaSetupError(f"no {artifact} jar in {self.libs}")

    def java_argv(self, main_class: str, *args: str, jvm_options: Sequence[str] = ()) -> list[str]:
        """argv running ``main_class`` of this release with its logging configuration."""
        log_property = "log4j2.configurationFile" if self.major >= 4 else "log4j.configuration"
        log_value = str(self.log_config) if self.major >= 4 else self.log_config.as_uri()
        return [
            self.java,
            *jvm_options,
            f"-D{log_property}={log_value}",
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]

    def run(
        self, main_class: str, *args: str, timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's command-line tools (``kafka.tools.StorageTool``,
        ``org.apache.kafka.tools.reassign.ReassignPartitionsCommand``, ...) to completion
        and return what it printed. Does not check the exit status."""
        return subprocess.run(
            self.java_argv(main_class, *args, jvm_options=_TOOL_JVM_OPTIONS),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )


#: JVM options of the short-lived tool processes: a small heap and the quick compiler.
_TOOL_JVM_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def kafka_distribution(version: str | None = None) -> KafkaDistribution:
    """Apache Kafka ``version`` (default ``$COOPCONSUMER_KAFKA_VERSION``, else
    :data:`DEFAULT_KAFKA_VERSION`), resolved from Maven Central on first use.

    The jars go to ``<cache>/coopconsumer/kafka/<version>/libs`` and are reused by every
    later call and process. Needs ``java`` (17 or newer) and, the first time, ``mvn`` on
    PATH. Raises :class:`KafkaSetupError` naming what is missing or what Maven said.
    """
    chosen = version or os.environ.get(KAFKA_VERSION_ENV, "").strip() or DEFAULT_KAFKA_VERSION
    if not _VERSION_RE.match(chosen):
        raise KafkaSetupError(f"Kafka version {chosen!r} is not like '4.4.0'")
    java = _check_java()
    home = _cache_root() / chosen
    libs = home / "libs"
    if not (libs / _COMPLETE).is_file():
        home.mkdir(parents=True, exist_ok=True)
        with _locked(home / ".lock"):
            if not (libs / _COMPLETE).is_file():
                _resolve(chosen, home, libs)
    major = int(chosen.split(".", 1)[0])
    log_config = home / ("log4j2.properties" if major >= 4 else "log4j.properties")
    text = _LOG4J2 if major >= 4 else _LOG4J1
    if not log_config.is_file() or log_config.read_text() != text:
        tmp = log_config.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(log_config)
    return KafkaDistribution(version=chosen, libs=libs, java=java, log_config=log_config)


def _cache_root() -> Path:
    explicit = os.environ.get(CACHE_DIR_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser() / "kafka"
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "coopconsumer" / "kafka"


def _check_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaSetupError(
            "Apache Kafka needs Java 17 or newer and there is no 'java' on PATH: install a "
            "JDK (e.g. apt-get install openjdk-17-jre-headless)"
        )
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KafkaSetupError(f"'{java} -version' failed: {exc}") from exc
    text = out.stderr + out.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if match is None:
        raise KafkaSetupError(f"cannot read the Java version from '{java} -version': {text!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_x" is Java 8
        major = int(match.group(2))
    if major < _MIN_JAVA:
        raise KafkaSetupError(
            f"Apache Kafka 4 needs Java {_MIN_JAVA} or newer; '{java}' is Java {major}"
        )
    return java


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _dependency(group: str, artifact: str, version: str) -> str:
    return (
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
    )


def _jar_version(libs: Path, artifact: str) -> str | None:
    pattern = re.compile(rf"^{re.escape(artifact)}-(\d[^/]*)\.jar$")
    for path in libs.iterdir():
        match = pattern.match(path.name)
        if match:
            return match.group(1)
    return None


def _binding(libs: Path) -> tuple[str, str, str] | None:
    """The slf4j binding Kafka's tarball adds and no POM names, or None when one is
    there (Kafka 3.x brings slf4j-reload4j itself)."""
    names = {p.name.rsplit("-", 1)[0] for p in libs.glob("*.jar")}
    if names & {"slf4j-reload4j", "log4j-slf4j-impl", "log4j-slf4j2-impl", "slf4j-simple"}:
        return None
    log4j = _jar_version(libs, "log4j-api") or "2.24.3"
    slf4j = _jar_version(libs, "slf4j-api") or "1.7.36"
    artifact = "log4j-slf4j2-impl" if slf4j.startswith("2.") else "log4j-slf4j-impl"
    return ("org.apache.logging.log4j", artifact, log4j)


def _resolve(version: str, home: Path, libs: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError(
            "resolving Apache Kafka's jars needs Maven and there is no 'mvn' on PATH: "
            "install it (e.g. apt-get install maven), or fill "
            f"{libs} yourself and create {libs / _COMPLETE}"
        )
    staging = home / f"libs.staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
    ]
    started = time.monotonic()
    try:
        _copy_dependencies(mvn, home, staging, deps, version)
        binding = _binding(staging)
        if binding is not None:
            _copy_dependencies(mvn, home, staging, [*deps, binding], version)
        (staging / _COMPLETE).write_text(
            f"Apache Kafka {version}, resolved in {time.monotonic() - started:.1f} s\n"
        )
        shutil.rmtree(libs, ignore_errors=True)
        staging.replace(libs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_dependencies(
    mvn: str, home: Path, output: Path, deps: Sequence[tuple[str, str, str]], version: str
) -> None:
    pom = home / "pom.xml"
    pom.write_text(
        _POM.format(version=version, dependencies="\n".join(_dependency(*d) for d in deps))
    )
    argv = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={output}",
        "-DincludeScope=runtime",
    ]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_MVN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaSetupError(
            f"Maven did not resolve Apache Kafka {version} within {_MVN_TIMEOUT_S:.0f} s "
            f"({' '.join(argv)})"
        ) from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise KafkaSetupError(
            f"Maven could not resolve Apache Kafka {version} (exit {done.returncode}); "
            f"is {version} published and Maven Central reachable? Command: {' '.join(argv)}",
            stderr_tail=tail,
        )
