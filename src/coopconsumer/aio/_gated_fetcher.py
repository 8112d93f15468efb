"""The record fetcher, held shut while a coroutine rebalance callback runs.

A sync callback runs inside ``poll()``, so no record is returned while it runs. A
coroutine callback runs as a task beside the application's ``await poll()``; the
consumer's logic would otherwise fetch in the very call that started the callback and
return records of partitions being revoked before their callback ran. Importing this
module loads librdkafka (``_io._fetcher``).
"""

from __future__ import annotations

from collections.abc import Callable

from .._io._fetcher import Fetcher, Record

__all__ = ["GatedFetcher"]


class GatedFetcher(Fetcher):
    """``Fetcher`` whose ``consume`` returns nothing while ``shut()`` says so."""

    shut: Callable[[], bool] = staticmethod(lambda: False)

    def consume(self, max_records: int, timeout_s: float) -> list[Record]:
        if self.shut():
            return []
        return super().consume(max_records, timeout_s)
