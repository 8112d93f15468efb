"""Parent side of the librdkafka mock cluster running in ``_mock_server``.

Turns the public fault-injection methods into JSON commands for the child process.
Imports the standard library, the sibling testing modules and coopconsumer's value and
error types only (the child loads librdkafka; this side never does).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import (
    BrokerConnectionError,
    ConfigurationError,
    KafkaError,
    RequestTimeoutError,
)
from .._types import TopicPartition
from ._broker import (
    BrokerKind,
    BrokerStartupError,
    EmbeddedBroker,
    MockRequest,
    _ManagedProcess,
    _require_int,
    _require_topic,
    helper_argv,
)
from ._readiness_probe import wait_until_answering

__all__ = ["MockBroker", "start_mock"]

_COMMAND_TIMEOUT_S = 30.0


class MockBroker(EmbeddedBroker):
    """librdkafka's mock cluster (``embedded_broker("mock")``): every fault injection of
    :class:`EmbeddedBroker`, and the settings of the mock's KIP-848 consumer groups
    (``group.protocol=consumer``), which only the mock has.

    The KIP-848 settings are cluster-wide: a group copies them on each
    ConsumerGroupHeartbeat it answers, so they take effect at the next heartbeat of
    every member, existing groups included.
    """

    kind: BrokerKind = "mock"
    supports_faults = True

    def __init__(self, process: _ManagedProcess, num_brokers: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._process = process
        self._num_brokers = num_brokers

    @property
    def pid(self) -> int:
        """PID of the Python process hosting the mock cluster."""
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process.exit_status() is None

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """The mock's broker ids: ``1..num_brokers``."""
        return tuple(range(1, self._num_brokers + 1))

    def output_tail(self, chars: int = 4000) -> str:
        return self._process.output_tail(chars)

    def stop(self) -> None:
        self._process.stop()
        self._process.discard_log()

    def _call(self, op: str, **args: Any) -> Any:
        try:
            reply = self._process.request({"op": op, "args": args}, _COMMAND_TIMEOUT_S)
        except TimeoutError as exc:
            raise RequestTimeoutError(
                f"mock command {op} got no answer within {_COMMAND_TIMEOUT_S} s",
                broker=self.bootstrap,
            ) from exc
        if reply is None:
            raise BrokerConnectionError(
                f"mock cluster process is gone (exit status {self._process.exit_status()}); "
                f"its output ends with:\n{self._process.output_tail()}",
                broker=self.bootstrap,
            )
        if reply.get("ok"):
            return reply.get("result")
        code = reply.get("code")
        if code is None:
            raise ConfigurationError(f"mock command {op}: {reply.get('error')}")
        name = str(reply.get("name") or "UNKNOWN")
        raise KafkaError(int(code), name, message=str(reply.get("error")), broker=self.bootstrap)

    def _broker_id(self, broker_id: int) -> int:
        _require_int(broker_id, "broker_id")
        if broker_id != -1 and broker_id not in self.broker_ids:
            raise ConfigurationError(
                f"broker_id {broker_id} is not -1 or one of the mock's ids {self.broker_ids}"
            )
        return broker_id

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        timeout_s: float = 15.0,
    ) -> None:
        # The mock has no CreateTopics handler (rdkafka_mock.h); its own call is
        # synchronous, so the topic is in the next Metadata response.
        _require_topic(name)
        _require_int(partitions, "partitions", minimum=1)
        _require_int(replication_factor, "replication_factor", minimum=1)
        if replication_factor > self._num_brokers:
            raise ConfigurationError(
                f"replication_factor {replication_factor} > {self._num_brokers} mock brokers"
            )
        self._call(
            "topic_create", topic=name, partitions=partitions, replication=replication_factor
        )

    def set_broker_down(self, broker_id: int) -> None:
        self._call("broker_set_down", broker_id=self._broker_id(broker_id))

    def set_broker_up(self, broker_id: int) -> None:
        self._call("broker_set_up", broker_id=self._broker_id(broker_id))

    def set_broker_rtt(self, broker_id: int, rtt_ms: int) -> None:
        _require_int(rtt_ms, "rtt_ms", minimum=0)
        self._call("broker_set_rtt", broker_id=self._broker_id(broker_id), rtt_ms=rtt_ms)

    def push_request_errors(self, api_key: int, codes: Sequence[int]) -> None:
        _require_int(api_key, "api_key", minimum=0)
        checked = [_require_int(code, "error code") for code in codes]
        if not checked:
            raise ConfigurationError("push_request_errors needs at least one error code")
        self._call("push_request_errors", api_key=api_key, codes=checked)

    def clear_request_errors(self, api_key: int) -> None:
        self._call("clear_request_errors", api_key=_require_int(api_key, "api_key", minimum=0))

    def set_coordinator(self, group_id: str, broker_id: int) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError(f"group_id must be a non-empty str, not {group_id!r}")
        self._call(
            "coordinator_set", key_type="group", key=group_id, broker_id=self._broker_id(broker_id)
        )

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        self._call(
            "partition_set_leader",
            topic=_require_topic(topic),
            partition=_require_int(partition, "partition", minimum=0),
            broker_id=self._broker_id(broker_id),
        )

    def set_topic_error(self, topic: str, code: int) -> None:
        self._call("topic_set_error", topic=_require_topic(topic), code=_require_int(code, "code"))

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        self._call(
            "group_initial_rebalance_delay_ms",
            delay_ms=_require_int(delay_ms, "delay_ms", minimum=0),
        )

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        self._call(
            "set_apiversion",
            api_key=_require_int(api_key, "api_key", minimum=0),
            min_version=_require_int(min_version, "min_version", minimum=-1),
            max_version=_require_int(max_version, "max_version", minimum=-1),
        )

    def set_group_consumer_session_timeout_ms(self, timeout_ms: int) -> None:
        """The broker's ``group.consumer.session.timeout.ms`` (mock default 30000): a
        consumer-protocol member that sends no heartbeat for this long is removed from
        its group (checked once a second) and its next heartbeat is answered
        ``UNKNOWN_MEMBER_ID``."""
        self._call(
            "group_consumer_session_timeout_ms",
            timeout_ms=_require_int(timeout_ms, "timeout_ms", minimum=1),
        )

    def set_group_consumer_heartbeat_interval_ms(self, interval_ms: int) -> None:
        """The broker's ``group.consumer.heartbeat.interval.ms`` (mock default 3000),
        which every ConsumerGroupHeartbeat answer tells the member to heartbeat at."""
        self._call(
            "group_consumer_heartbeat_interval_ms",
            interval_ms=_require_int(interval_ms, "interval_ms", minimum=1),
        )

    def set_consumer_group_target_assignment(
        self, group_id: str, assignment: Mapping[str, Iterable[TopicPartition]] | None
    ) -> None:
        """Replace the mock's own (uniform) assignor for the consumer-protocol group
        ``group_id``: member id -> its target partitions, from the next heartbeat on
        (the group epoch is bumped). Members not named keep their target; ``None``
        goes back to the mock's assignor. A group or member the mock does not know (no
        heartbeat yet) is silently ignored by the mock."""
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError(f"group_id must be a non-empty str, not {group_id!r}")
        wire: dict[str, list[list[object]]] | None = None
        if assignment is not None:
            wire = {}
            for member_id, partitions in assignment.items():
                if not isinstance(member_id, str) or not member_id:
                    raise ConfigurationError(f"member id must be a non-empty str: {member_id!r}")
                wire[member_id] = [
                    [_require_topic(tp.topic), _require_int(tp.partition, "partition", minimum=0)]
                    for tp in sorted(partitions)
                ]
        self._call("cgrp_consumer_target_assignment", group_id=group_id, assignment=wire)

    def start_request_tracking(self) -> None:
        self._call("start_request_tracking")

    def stop_request_tracking(self) -> None:
        self._call("stop_request_tracking")

    def requests(self) -> list[MockRequest]:
        return [MockRequest(int(b), int(k)) for b, k in self._call("get_requests")]

    def clear_requests(self) -> None:
        self._call("clear_requests")


def start_mock(*, num_brokers: int, startup_timeout_s: float) -> MockBroker:
    """Start the mock cluster subprocess; return once every broker answers ApiVersions."""

    deadline = time.monotonic() + startup_timeout_s
    process = _ManagedProcess(
        helper_argv("_mock_server.py", str(num_brokers)),
        env=os.environ,
        label="mock",
    )
    try:
        header = process.read_line(max(0.1, deadline - time.monotonic()))
        if header is None:
            raise ChildProcessError(f"mock server exited ({process.exit_status()})")
        hello = json.loads(header)
        if not hello.get("ready"):
            raise ChildProcessError(f"mock server failed: {hello.get('error')}")
        bootstrap = str(hello["bootstrap"])
        addresses = bootstrap.split(",")
        answers = wait_until_answering(
            addresses,
            timeout_s=max(0.1, deadline - time.monotonic()),
            still_starting=process.exit_reason,
        )
        return MockBroker(
            process, num_brokers, bootstrap=bootstrap, api_versions=answers[addresses[0]]
        )
    except (ChildProcessError, TimeoutError, ValueError, KeyError) as exc:
        process.stop()
        tail = process.output_tail()
        process.discard_log()
        raise BrokerStartupError(
            f"librdkafka mock cluster did not start: {exc}", stderr_tail=tail
        ) from exc
    except BaseException:
        process.stop()
        process.discard_log()
        raise
