"""Build the reference peers of issue 32 (tests/peers/) once and cache the builds.

* :func:`java_peer` compiles ``java/PeerMember.java`` with ``javac`` against the
  ``kafka-clients`` jar of the test broker's own Kafka distribution
  (``coopconsumer.testing.kafka_distribution``) and returns how to run it: the JVM, a
  classpath of kafka-clients, its codec jars, slf4j-api with the log4j2 binding, and a
  log4j2 configuration that writes the client's warnings (and its coordinator's lines)
  to stderr, never to stdout, where the peer prints its JSON lines.
* :func:`go_peer` builds ``go/`` with ``go build`` (the module and its dependencies
  pinned by ``go/go.mod`` and ``go/go.sum``, fetched through the Go module proxy).

Builds land in ``<cache>/coopconsumer/peers/<kind>-<hash>`` where the hash covers the
sources, the toolchain's version and (Java) the Kafka version, so a changed source or
toolchain builds again and an unchanged one never does. Concurrent xdist workers build
once, under a file lock. A missing ``javac``/``go`` skips the test with the reason,
except on CI (``CI=true``), where it fails: the reference clients must run there.

Test helper only; nothing here is product code.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from coopconsumer.testing import kafka_distribution

__all__ = ["GoPeer", "JavaPeer", "go_peer", "java_peer", "missing_tool"]

_HERE = Path(__file__).resolve().parent
_JAVA_SOURCE = _HERE / "java" / "PeerMember.java"
_GO_DIR = _HERE / "go"
_GO_SOURCES = ("main.go", "go.mod", "go.sum")
#: Jars the Java peer runs with, by artifact name prefix (the versions are the broker's).
_RUNTIME_JARS = (
    "kafka-clients-",
    "lz4-java-",
    "snappy-java-",
    "zstd-jni-",
    "slf4j-api-",
    "log4j-slf4j-impl-",
    "log4j-slf4j2-impl-",
    "log4j-api-",
    "log4j-core-",
)
_COMPLETE = ".complete"
_BUILD_TIMEOUT_S = 600.0

#: log4j2 for the peer: stdout carries only the peer's JSON lines.
_LOG4J2 = """status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
logger.coordinator.name = org.apache.kafka.clients.consumer.internals
logger.coordinator.level = INFO
"""


def missing_tool(reason: str) -> None:
    """Skip the calling test for ``reason``, or fail it on CI (``CI=true``)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the reference peers: {reason}")
    pytest.skip(reason)


@dataclass(frozen=True)
class JavaPeer:
    """How to run the compiled Java peer."""

    java: str
    classpath: str
    log_config: Path
    kafka_version: str

    def argv(self, *args: str) -> list[str]:
        """The command line running ``PeerMember`` with ``args``."""
        return [
            self.java,
            "-Xmx192m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self.log_config}",
            "-cp",
            self.classpath,
            "PeerMember",
            *args,
        ]


@dataclass(frozen=True)
class GoPeer:
    """The built franz-go peer."""

    binary: Path

    def argv(self, *args: str) -> list[str]:
        return [str(self.binary), *args]


def _cache_root() -> Path:
    root = os.environ.get("COOPCONSUMER_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    base = Path(root) if root else Path.home() / ".cache"
    return base / "coopconsumer" / "peers"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _digest(parts: Sequence[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def _tool_version(argv: Sequence[str]) -> bytes:
    done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    return done.stdout + done.stderr


def _build_once(target: Path, build: Callable[[Path], None]) -> None:
    """Run ``build(tmpdir)`` and move the result to ``target`` unless it is complete."""
    if (target / _COMPLETE).exists():
        return
    with _locked(target.with_name(target.name + ".lock")):
        if (target / _COMPLETE).exists():
            return
        work = target.with_name(target.name + ".tmp")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        build(work)
        (work / _COMPLETE).write_text("ok\n")
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)


def _run(
    argv: Sequence[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> None:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=_BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def java_peer() -> JavaPeer:
    """The Java peer, compiled on first use (skips, or fails on CI, without ``javac``)."""
    javac = shutil.which("javac")
    if javac is None:
        missing_tool("javac is not on PATH: the Java reference peer cannot be built")
    assert javac is not None
    dist = kafka_distribution()
    jars: list[Path] = []
    for prefix in _RUNTIME_JARS:
        jars.extend(
            sorted(p for p in dist.libs.glob(f"{prefix}*.jar") if p.name[len(prefix)].isdigit())
        )
    clients = dist.jar("kafka-clients")
    key = _digest(
        [
            _JAVA_SOURCE.read_bytes(),
            _LOG4J2.encode(),
            dist.version.encode(),
            _tool_version([javac, "-version"]),
        ]
    )
    target = _cache_root() / f"java-{key}"

    def build(work: Path) -> None:
        _run([javac, "-d", str(work / "classes"), "-cp", str(clients), str(_JAVA_SOURCE)], "javac")
        (work / "log4j2.properties").write_text(_LOG4J2)

    _build_once(target, build)
    classpath = os.pathsep.join([str(target / "classes"), *map(str, jars)])
    return JavaPeer(
        java=dist.java,
        classpath=classpath,
        log_config=target / "log4j2.properties",
        kafka_version=dist.version,
    )


def go_peer() -> GoPeer:
    """The franz-go peer, built on first use (skips, or fails on CI, without ``go``)."""
    go = shutil.which("go")
    if go is None:
        missing_tool("go is not on PATH: the franz-go reference peer cannot be built")
    assert go is not None
    key = _digest(
        [*((_GO_DIR / name).read_bytes() for name in _GO_SOURCES), _tool_version([go, "version"])]
    )
    target = _cache_root() / f"go-{key}"

    def build(work: Path) -> None:
        env = dict(os.environ)
        # go.sum is committed: a build never edits the module files.
        env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
        _run([go, "build", "-o", str(work / "peer"), "."], "go build", cwd=_GO_DIR, env=env)

    _build_once(target, build)
    return GoPeer(binary=target / "peer")
