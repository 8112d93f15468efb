"""Apache Kafka in Docker through testcontainers, behind the ``EmbeddedBroker`` interface.

For users whose machines run a Docker engine. No engine runs where this project is
built, so this adapter is kept tiny and is not exercised there beyond its refusal
(docs/testing.md, "Apache Kafka"). ``testcontainers`` comes with the ``docker`` extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._broker import EmbeddedBroker, external_broker
from ._kafka_dist import KafkaSetupError

__all__ = ["DEFAULT_CONTAINER_IMAGE", "kafka_container"]

#: The image testcontainers' ``KafkaContainer`` knows how to configure for KRaft.
DEFAULT_CONTAINER_IMAGE = "confluentinc/cp-kafka:7.9.0"


@contextmanager
def kafka_container(
    image: str = DEFAULT_CONTAINER_IMAGE, *, startup_timeout_s: float = 120.0
) -> Iterator[EmbeddedBroker]:
    """Start Kafka (KRaft) in a container; yield it as an :class:`EmbeddedBroker` of kind
    ``"external"``; remove the container on exit.

    Raises :class:`KafkaSetupError` when ``testcontainers`` is not installed (``pip
    install 'coopconsumer[docker]'``) or no Docker engine answers; nothing is started
    then. Without Docker, use ``embedded_broker("kafka")``: the same Kafka as JVMs.
    """
    try:
        import docker
        from testcontainers.community.kafka import KafkaContainer
    except ImportError as exc:
        raise KafkaSetupError(
            "kafka_container needs testcontainers: pip install 'coopconsumer[docker]' "
            "(or use embedded_broker('kafka'), which needs no Docker)"
        ) from exc
    try:
        docker.from_env().ping()
    except Exception as exc:  # the docker SDK raises several unrelated types here
        raise KafkaSetupError(
            f"kafka_container needs a running Docker engine and none answered ({exc}); "
            "use embedded_broker('kafka'), which needs no Docker"
        ) from exc
    container: Any = KafkaContainer(image).with_kraft()
    container.start(timeout=int(startup_timeout_s))
    try:
        yield external_broker(container.get_bootstrap_server(), timeout_s=startup_timeout_s)
    finally:
        container.stop()
