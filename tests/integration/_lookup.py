"""Coordinator lookups for the wire-level integration tests.

``find_coordinator``: test plumbing for tests that speak the group protocol by hand
(the library's own lookup is the group member's, ``_member/_discovery.py``).
``member_lookup``: that member lookup, on a driver thread against a test broker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from coopconsumer._io import ClientConfig, KafkaClient
from coopconsumer._io._member_driver import Driver
from coopconsumer._member import GroupMember, MemberConfig, Subscribe
from coopconsumer._metrics import CoordinatorMetrics
from coopconsumer._protocol import error_codes
from coopconsumer._protocol.messages import FindCoordinatorRequest
from coopconsumer._protocol.queries import FindCoordinatorQuery, coordinator_answer
from coopconsumer.assignors import load_assignors

#: What a broker answers while its group coordinator starts or moves.
_RETRIABLE = frozenset(
    {
        error_codes.COORDINATOR_NOT_AVAILABLE,
        error_codes.COORDINATOR_LOAD_IN_PROGRESS,
        error_codes.NOT_COORDINATOR,
    }
)


def find_coordinator(client: KafkaClient, group: str, *, timeout_s: float = 30.0) -> int:
    """The node id of ``group``'s coordinator (its address learned by ``client``);
    retries the answers of a coordinator that is starting or moving, raises others."""
    deadline = time.monotonic() + timeout_s
    if client.cluster is None:
        client.metadata(topics=())
    while True:
        node = client.least_loaded_node()
        assert node is not None, "no broker known"
        version = client.negotiated_version(node, FindCoordinatorRequest)
        response = client.request(
            node, FindCoordinatorQuery(key=group).build(version), api_version=version
        )
        answer = coordinator_answer(response, group, version)
        if answer.error_code == error_codes.NONE:
            client.add_broker(answer.node_id, answer.host, answer.port)
            return answer.node_id
        if answer.error_code not in _RETRIABLE or time.monotonic() >= deadline:
            raise error_codes.to_exception(
                answer.error_code,
                api_key=FindCoordinatorRequest.API_KEY,
                api_version=version,
                message=answer.error_message,
            )
        time.sleep(0.05)


@contextlib.contextmanager
def member_lookup(bootstrap: str, group: str) -> Iterator[tuple[Driver, GroupMember]]:
    """A classic member subscribed to nothing in particular ("t"), on a driver thread:
    it looks its coordinator up at once."""
    client = KafkaClient(ClientConfig.from_bootstrap(bootstrap))
    member = GroupMember(
        MemberConfig(group_id=group, retry_backoff_ms=10), load_assignors(["range"])
    )
    driver = Driver(member, client, CoordinatorMetrics(), request_timeout_ms=5_000)
    driver.start()
    try:
        driver.request(Subscribe(topics=frozenset({"t"})), 10.0)
        yield driver, member
    finally:
        driver.stop(10.0)


def wait_until(condition: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    """Poll ``condition()`` until true or ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False
