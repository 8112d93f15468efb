"""Build the Java transactional loop (``tests/peers/java/PeerEosLoop.java``) once and
say how to run it: compiled with ``javac`` against the ``kafka-clients`` jar of the test
broker's own Kafka distribution (``coopconsumer.testing.kafka_distribution``), as
``tests/peers/_build.py`` builds the Java group member, cached under
``<cache>/coopconsumer/peers/eos-java-<hash>`` (the hash covers the source, the Kafka
version and ``javac -version``).

Reliability tooling; imports ``coopconsumer.testing`` only.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["java_loop_argv"]

_SOURCE = Path(__file__).resolve().parent.parent / "tests" / "peers" / "java" / "PeerEosLoop.java"
#: Jars the loop runs with, by artifact name prefix (the versions are the broker's).
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
#: The client's warnings to stderr (the runner keeps it in the slot's log).
_LOG4J2 = """status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""


def _cache_root() -> Path:
    root = os.environ.get("COOPCONSUMER_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    base = Path(root) if root else Path.home() / ".cache"
    return base / "coopconsumer" / "peers"


def java_loop_argv() -> list[str]:
    """The command line (without arguments) running ``PeerEosLoop``; compiles it the
    first time. Raises ``RuntimeError`` when ``javac`` is missing or fails."""
    from coopconsumer.testing import kafka_distribution

    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is not on PATH: the Java transactional loop cannot be built")
    dist = kafka_distribution()
    version = subprocess.run([javac, "-version"], capture_output=True, check=False, timeout=60)
    digest = hashlib.sha256()
    for part in (_SOURCE.read_bytes(), _LOG4J2.encode(), dist.version.encode(), version.stdout):
        digest.update(len(part).to_bytes(8, "big") + part)
    target = _cache_root() / f"eos-java-{digest.hexdigest()[:16]}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            clients = dist.jar("kafka-clients")
            done = subprocess.run(
                [javac, "-d", str(target / "classes"), "-cp", str(clients), str(_SOURCE)],
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            if done.returncode != 0:
                raise RuntimeError(f"javac failed:\n{done.stdout}\n{done.stderr}")
            (target / "log4j2.properties").write_text(_LOG4J2)
            (target / ".complete").write_text("ok\n")
    jars: list[str] = []
    for prefix in _RUNTIME_JARS:
        jars.extend(
            str(p)
            for p in sorted(dist.libs.glob(f"{prefix}*.jar"))
            if p.name[len(prefix)].isdigit()
        )
    return [
        dist.java,
        "-Xmx160m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        f"-Dlog4j2.configurationFile={target / 'log4j2.properties'}",
        "-cp",
        os.pathsep.join([str(target / "classes"), *jars]),
        "PeerEosLoop",
    ]
