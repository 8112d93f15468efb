"""Pausing Python's cyclic garbage collector while a built-in assignor runs a large pass.

Opt-in: a built-in assignor (range, roundrobin, sticky, cooperative-sticky) pauses the
collector only when it was constructed with ``pause_gc=True``. By default the collector
is left alone, because a pause is a process-wide side effect the application did not ask
for: ``gc.disable()`` affects every thread of the process. When opted in, the rules:

* Passes over fewer than ``GC_PAUSE_THRESHOLD`` partitions leave the collector alone.
* The pause is reference-counted across threads (two consumers in one process may lead
  their groups at the same time): the first pass to start disables the collector if it
  was enabled, and the last pass to finish re-enables it. A pass that ends while
  another is still running leaves the collector paused for that other pass.
* If the collector was already disabled when the first pass started (the application
  called ``gc.disable()``), it stays disabled.
* Exceptions inside a pass still release it (``finally``).
* Not covered: an application that toggles the collector from another thread while a
  pass is running; the last pass to finish restores the state seen when the pause
  began.

The counter is guarded by a ``threading.Lock`` held for a few bytecodes, never across the
assignment itself. This is the one module of the assignor layer allowed to import
``threading`` (``test_layering`` names it): nothing here starts threads, blocks on I/O
or reads a clock.

Imports only the standard library.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["GC_PAUSE_THRESHOLD", "paused_gc"]

#: Below this many partitions the collector's work is negligible; leave it alone.
GC_PAUSE_THRESHOLD = 20_000

_lock = threading.Lock()
_active = 0  # passes currently inside paused_gc above the threshold
_reenable = False  # whether the first of those passes found the collector enabled


@contextmanager
def paused_gc(partitions: int, *, enabled: bool) -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass over ``partitions`` runs.

    Does nothing unless ``enabled`` (the assignor's ``pause_gc`` setting) is true and the
    pass covers at least ``GC_PAUSE_THRESHOLD`` partitions.

    Assigning a million partitions allocates a million tuples; each allocation burst
    triggers collections, and the full ones walk the whole heap (measured: one sticky
    pass went from 1.3 s to 3.8 s with a 2M-object heap). Nothing the assignors
    allocate forms a reference cycle, so pausing frees nothing late. See the module
    docstring for the thread-safety rules.
    """
    global _active, _reenable
    if not enabled or partitions < GC_PAUSE_THRESHOLD:
        yield
        return
    with _lock:
        if _active == 0:
            _reenable = gc.isenabled()
            if _reenable:
                gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _reenable:
                _reenable = False
                gc.enable()
