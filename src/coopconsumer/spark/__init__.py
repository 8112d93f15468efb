"""Kafka I/O for PySpark jobs: group members inside Spark tasks, and Kafka writers.

Spark's own Kafka source and sink are JVM jars; where they cannot be installed, this
module is how a PySpark job reads and writes Kafka:

* :func:`run_consume_job` runs N Spark tasks, each a cooperative-sticky member of one
  consumer group, consumes a topic up to the end offsets seen when the job started,
  hands each batch to a sink function and commits only after the sink returned. It
  returns one row of statistics per member as a DataFrame. With ``exactly_once=True``
  each member is a :class:`coopconsumer.TransactionalProcessor`: the sink's output
  records and the batch's offsets commit in one Kafka transaction (KIP-447).
  :func:`start_consume_job` runs the same members until it is stopped.
* :class:`KafkaWriter` produces the rows of a DataFrame partition to Kafka with the
  idempotent producer, from ``df.foreachPartition`` or ``df.mapInPandas``, and raises
  :class:`coopconsumer.DeliveryError` naming the topic and partition of a failed record;
  with ``transactional_id`` each task writes its rows in one transaction.
* :class:`CoopConsumerDataSource` (``format("coopconsumer")``) reads and writes Kafka
  with Spark's Kafka source options.

Needs the ``spark`` extra (``pip install 'coopconsumer[spark]'``). The names are loaded
on first use, so the writer can be imported on executors without touching the driver
machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._consume import ConsumeJob as ConsumeJob
    from ._consume import MemberStats as MemberStats
    from ._consume import MemberStatus as MemberStatus
    from ._consume import run_consume_job as run_consume_job
    from ._consume import start_consume_job as start_consume_job
    from ._source import CoopConsumerDataSource as CoopConsumerDataSource
    from ._source import register_data_source as register_data_source
    from ._writer import KafkaWriter as KafkaWriter

_WHERE = {
    "ConsumeJob": "._consume",
    "MemberStats": "._consume",
    "MemberStatus": "._consume",
    "run_consume_job": "._consume",
    "start_consume_job": "._consume",
    "KafkaWriter": "._writer",
    "CoopConsumerDataSource": "._source",
    "register_data_source": "._source",
}

__all__ = [
    "ConsumeJob",
    "CoopConsumerDataSource",
    "KafkaWriter",
    "MemberStats",
    "MemberStatus",
    "register_data_source",
    "run_consume_job",
    "start_consume_job",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module, __name__), name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in {"pyspark", "pandas", "pyarrow"}:
            raise ModuleNotFoundError(
                f"coopconsumer.spark.{name} needs {exc.name}: "
                "install the extra with pip install 'coopconsumer[spark]'",
                name=exc.name,
            ) from exc
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
