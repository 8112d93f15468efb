"""Counting the cyclic garbage collector's collections around a piece of work."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TypeVar

_R = TypeVar("_R")


def collections_started(run: Callable[[], _R]) -> tuple[int, _R]:
    """How many collections the collector started while ``run`` ran (``gc.callbacks``
    sees every one), after a full collection; and what ``run`` returned."""
    started: list[int] = []

    def on_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(on_collection)
    try:
        result = run()
    finally:
        gc.callbacks.remove(on_collection)
    return len(started), result
