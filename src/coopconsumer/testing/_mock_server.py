"""Subprocess entry point hosting librdkafka's mock cluster (``python -m ...``).

librdkafka ships a mock Kafka cluster (``rd_kafka_mock_*`` in rdkafka_mock.h) that the
confluent-kafka binding does not expose; this module reaches it through ctypes on the
librdkafka copy inside the confluent-kafka wheel. It runs in its own process because the
mock calls abort() on some inputs (members offering different first protocols) and lives
only as long as the rd_kafka_t handle that created it.

Protocol: the first stdout line is ``{"ready": true, "bootstrap": ..., "pid": ...}``
(or ``{"ready": false, "error": ...}``); then every stdin line is one JSON command
``{"id": n, "op": name, "args": {...}}`` answered by one stdout line
``{"id": n, "ok": true, "result": ...}`` or ``{"id": n, "ok": false, "error": ...,
"code": ..., "name": ...}`` (``code`` is librdkafka's, ``null`` for a malformed command).
The process exits when stdin closes, so it never outlives the test process that
started it.

Imports only the standard library (not confluent_kafka, not the rest of coopconsumer):
it is run by path, must start fast and must not depend on the code under test.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_API_VERSION_CAPS", "find_librdkafka", "main"]

#: JoinGroup (11), SyncGroup (14), LeaveGroup (13): the mock advertises higher versions
#: than it implements correctly, so they are capped at start (docs/testing.md).
DEFAULT_API_VERSION_CAPS: dict[int, tuple[int, int]] = {11: (0, 5), 14: (0, 3), 13: (0, 2)}

_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0

_c_void_p = ctypes.c_void_p
_c_char_p = ctypes.c_char_p
_c_int = ctypes.c_int
_c_int16 = ctypes.c_int16
_c_int32 = ctypes.c_int32
_c_size_t = ctypes.c_size_t

# name -> (restype, argtypes), transcribed from librdkafka's rdkafka.h / rdkafka_mock.h.
# rd_kafka_resp_err_t is a C enum, i.e. an int.
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_conf_new": (_c_void_p, []),
    "rd_kafka_conf_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_char_p, _c_size_t]),
    "rd_kafka_new": (_c_void_p, [_c_int, _c_void_p, _c_char_p, _c_size_t]),
    "rd_kafka_destroy": (None, [_c_void_p]),
    "rd_kafka_err2name": (_c_char_p, [_c_int]),
    "rd_kafka_err2str": (_c_char_p, [_c_int]),
    "rd_kafka_mock_cluster_new": (_c_void_p, [_c_void_p, _c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (_c_char_p, [_c_void_p]),
    "rd_kafka_mock_clear_request_errors": (None, [_c_void_p, _c_int16]),
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [_c_void_p, _c_int16, _c_size_t, ctypes.POINTER(_c_int)],
    ),
    "rd_kafka_mock_topic_set_error": (None, [_c_void_p, _c_char_p, _c_int]),
    "rd_kafka_mock_topic_create": (_c_int, [_c_void_p, _c_char_p, _c_int, _c_int]),
    "rd_kafka_mock_partition_set_leader": (_c_int, [_c_void_p, _c_char_p, _c_int32, _c_int32]),
    "rd_kafka_mock_broker_set_down": (_c_int, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_up": (_c_int, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_rtt": (_c_int, [_c_void_p, _c_int32, _c_int]),
    "rd_kafka_mock_coordinator_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_int32]),
    "rd_kafka_mock_set_apiversion": (_c_int, [_c_void_p, _c_int16, _c_int16, _c_int16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_c_void_p, _c_int32]),
    "rd_kafka_mock_start_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_clear_requests": (None, [_c_void_p]),
    "rd_kafka_mock_get_requests": (
        ctypes.POINTER(_c_void_p),
        [_c_void_p, ctypes.POINTER(_c_size_t)],
    ),
    "rd_kafka_mock_request_id": (_c_int32, [_c_void_p]),
    "rd_kafka_mock_request_api_key": (_c_int16, [_c_void_p]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_c_void_p), _c_size_t]),
    # KIP-848 consumer groups (librdkafka 2.4+ mock): cluster defaults that a group
    # copies on every ConsumerGroupHeartbeat, and a manual target assignment.
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_cgrp_consumer_target_assignment_new": (
        _c_void_p,
        [ctypes.POINTER(_c_char_p), _c_int, ctypes.POINTER(_c_void_p)],
    ),
    "rd_kafka_mock_cgrp_consumer_target_assignment_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cgrp_consumer_target_assignment": (None, [_c_void_p, _c_char_p, _c_void_p]),
    "rd_kafka_topic_partition_list_new": (_c_void_p, [_c_int]),
    "rd_kafka_topic_partition_list_add": (_c_void_p, [_c_void_p, _c_char_p, _c_int32]),
    "rd_kafka_topic_partition_list_destroy": (None, [_c_void_p]),
}


def find_librdkafka() -> str:
    """Return the path of the librdkafka shared library confluent-kafka uses.

    Binary wheels vendor it next to the package (``confluent_kafka.libs/`` on Linux,
    ``confluent_kafka/.dylibs/`` on macOS); a source build links the system library.
    """
    spec = importlib.util.find_spec("confluent_kafka")
    candidates: list[str] = []
    if spec is not None and spec.submodule_search_locations:
        package_dir = next(iter(spec.submodule_search_locations))
        site_dir = os.path.dirname(package_dir)
        for pattern in (
            os.path.join(site_dir, "confluent_kafka.libs", "librdkafka*.so*"),
            os.path.join(package_dir, ".dylibs", "librdkafka*.dylib"),
        ):
            candidates.extend(sorted(glob.glob(pattern)))
    if candidates:
        return candidates[0]
    system = ctypes.util.find_library("rdkafka")
    if system is None:
        raise FileNotFoundError(
            "librdkafka not found: install confluent-kafka (a binary wheel bundles it)"
        )
    return system


def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


class CommandError(Exception):
    """A mock call returned a librdkafka error code, or the command was malformed."""

    def __init__(self, message: str, code: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.name = name


class MockCluster:
    """Owns one rd_kafka_t handle and the mock cluster created on it."""

    def __init__(self, lib: ctypes.CDLL, num_brokers: int) -> None:
        self._lib = lib
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # Quiet the owner handle: it never connects anywhere, so its only log line
        # would be the "no bootstrap.servers" warning.
        for key, value in ((b"log_level", b"3"), (b"client.id", b"coopconsumer-mock-owner")):
            if lib.rd_kafka_conf_set(conf, key, value, errstr, 512) != _RD_KAFKA_CONF_OK:
                raise CommandError(f"rd_kafka_conf_set({key!r}): {errstr.value.decode()}")
        # rd_kafka_new takes ownership of conf, also on failure.
        self._rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, 512)
        if not self._rk:
            raise CommandError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._cluster = lib.rd_kafka_mock_cluster_new(self._rk, num_brokers)
        if not self._cluster:
            lib.rd_kafka_destroy(self._rk)
            raise CommandError("rd_kafka_mock_cluster_new returned NULL")
        self.bootstrap: str = lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()

    def close(self) -> None:
        self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
        self._lib.rd_kafka_destroy(self._rk)

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            name = self._lib.rd_kafka_err2name(code).decode()
            text = self._lib.rd_kafka_err2str(code).decode()
            raise CommandError(f"{what} failed: {text}", code, name)

    # --- commands: one method per op name, keyword arguments from the JSON "args" ---

    def broker_set_down(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._cluster, broker_id), "set_down")

    def broker_set_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._cluster, broker_id), "set_up")

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        code = self._lib.rd_kafka_mock_broker_set_rtt(self._cluster, broker_id, rtt_ms)
        self._check(code, "broker_set_rtt")

    def push_request_errors(self, api_key: int, codes: list[int]) -> None:
        array = (_c_int * len(codes))(*codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._cluster, api_key, len(codes), array)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._cluster, api_key)

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        if key_type not in ("group", "transaction"):
            raise CommandError(f"key_type must be 'group' or 'transaction', not {key_type!r}")
        code = self._lib.rd_kafka_mock_coordinator_set(
            self._cluster, key_type.encode(), key.encode(), broker_id
        )
        self._check(code, "coordinator_set")

    def topic_create(self, topic: str, partitions: int, replication: int) -> None:
        code = self._lib.rd_kafka_mock_topic_create(
            self._cluster, topic.encode(), partitions, replication
        )
        self._check(code, "topic_create")

    def topic_set_error(self, topic: str, code: int) -> None:
        self._lib.rd_kafka_mock_topic_set_error(self._cluster, topic.encode(), code)

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        code = self._lib.rd_kafka_mock_partition_set_leader(
            self._cluster, topic.encode(), partition, broker_id
        )
        self._check(code, "partition_set_leader")

    def group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._cluster, delay_ms)

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        code = self._lib.rd_kafka_mock_set_apiversion(
            self._cluster, api_key, min_version, max_version
        )
        self._check(code, "set_apiversion")

    def group_consumer_session_timeout_ms(self, timeout_ms: int) -> None:
        self._lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(self._cluster, timeout_ms)

    def group_consumer_heartbeat_interval_ms(self, interval_ms: int) -> None:
        self._lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self._cluster, interval_ms)

    def cgrp_consumer_target_assignment(
        self, group_id: str, assignment: dict[str, list[list[Any]]] | None
    ) -> None:
        """``assignment``: member id -> ``[[topic, partition], ...]``; None returns the
        group to the mock's own assignor. A group or member id the mock does not know is
        ignored (rd_kafka_mock_cgrp_consumer_target_assignment)."""
        lib = self._lib
        if assignment is None:
            lib.rd_kafka_mock_cgrp_consumer_target_assignment(
                self._cluster, group_id.encode(), None
            )
            return
        member_ids = list(assignment)
        lists = [
            lib.rd_kafka_topic_partition_list_new(max(1, len(assignment[m]))) for m in member_ids
        ]
        target = None
        try:
            for member_id, tp_list in zip(member_ids, lists, strict=True):
                for topic, partition in assignment[member_id]:
                    lib.rd_kafka_topic_partition_list_add(
                        tp_list, str(topic).encode(), int(partition)
                    )
            ids = (_c_char_p * len(member_ids))(*(m.encode() for m in member_ids))
            pointers = (_c_void_p * len(lists))(*lists)
            # _new copies the ids and the lists.
            target = lib.rd_kafka_mock_cgrp_consumer_target_assignment_new(
                ids, len(member_ids), pointers
            )
            lib.rd_kafka_mock_cgrp_consumer_target_assignment(
                self._cluster, group_id.encode(), target
            )
        finally:
            if target:
                lib.rd_kafka_mock_cgrp_consumer_target_assignment_destroy(target)
            for tp_list in lists:
                lib.rd_kafka_topic_partition_list_destroy(tp_list)

    def start_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_start_request_tracking(self._cluster)

    def stop_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_stop_request_tracking(self._cluster)

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._cluster)

    def get_requests(self) -> list[list[int]]:
        count = _c_size_t(0)
        array = self._lib.rd_kafka_mock_get_requests(self._cluster, ctypes.byref(count))
        if not array:
            return []
        try:
            return [
                [
                    self._lib.rd_kafka_mock_request_id(array[index]),
                    self._lib.rd_kafka_mock_request_api_key(array[index]),
                ]
                for index in range(count.value)
            ]
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(array, count.value)


_OPS = frozenset(name for name in vars(MockCluster) if not name.startswith("_") and name != "close")


def _dispatch(cluster: MockCluster, line: str) -> dict[str, Any]:
    request_id = None
    try:
        command = json.loads(line)
        request_id = command.get("id")
        op = command["op"]
        args = command.get("args", {})
        if op not in _OPS:
            raise CommandError(f"unknown mock command {op!r}")
        method: Callable[..., Any] = getattr(cluster, op)
        return {"id": request_id, "ok": True, "result": method(**args)}
    except CommandError as exc:
        return {
            "id": request_id,
            "ok": False,
            "error": str(exc),
            "code": exc.code,
            "name": exc.name,
        }
    except (ValueError, KeyError, TypeError, AttributeError, ctypes.ArgumentError) as exc:
        return {
            "id": request_id,
            "ok": False,
            "error": f"malformed command {line.strip()!r}: {exc}",
            "code": None,
        }


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the mock cluster until stdin closes. ``argv``: ``[num_brokers]``."""
    args = sys.argv[1:] if argv is None else argv
    num_brokers = int(args[0]) if args else 1
    try:
        cluster = MockCluster(_load(find_librdkafka()), num_brokers)
        for api_key, (low, high) in DEFAULT_API_VERSION_CAPS.items():
            cluster.set_apiversion(api_key, low, high)
    except (OSError, AttributeError, CommandError) as exc:
        _reply({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    _reply({"ready": True, "bootstrap": cluster.bootstrap, "pid": os.getpid()})
    for line in sys.stdin:
        if line.strip():
            _reply(_dispatch(cluster, line))
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
