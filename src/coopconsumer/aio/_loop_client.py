"""The wire client on an asyncio event loop: ``KafkaClient`` with its selector replaced
by the loop's own readiness callbacks (docs/asyncio.md, "What runs on the loop").

Nothing of the protocol is here. Every connection stays the ``_io`` selector pump
around a sans-I/O ``BrokerSession`` (TLS through memory BIOs, ApiVersions, SASL,
KIP-368, framing), and the client keeps its nodes, backoff, bootstrap and metadata
handling. Only *where readiness comes from* changes: ``LoopSelector`` implements the
``selectors.BaseSelector`` interface the client and its connections use by asking the
event loop to watch each socket (``add_reader``/``add_writer``). The loop calls back
when a socket is ready; the selector records it and wakes the driver task, whose next
``KafkaClient.poll`` collects the readiness without blocking (``select`` never waits).

This needs an event loop with ``add_reader``/``add_writer`` (the default selector
loop on Unix, uvloop); Windows' proactor loop has neither and is refused with a clear
error.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import ConfigurationError
from .._io._client import ClientConfig, KafkaClient

__all__ = ["LoopKafkaClient", "LoopSelector"]

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class _KeyMap(Mapping[Any, selectors.SelectorKey]):
    """``get_map()``'s read-only view (by file object and by descriptor)."""

    def __init__(self, keys: dict[int, selectors.SelectorKey]) -> None:
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys[fd]

    def __iter__(self) -> Any:
        return iter(self._keys)


class LoopSelector(selectors.BaseSelector):
    """A ``selectors`` interface over an asyncio loop's readiness callbacks.

    ``register``/``modify``/``unregister`` become ``add_reader``/``add_writer`` and
    their removal; the loop's callbacks collect ``(key, mask)`` pairs and call
    ``on_ready`` (the driver's wake-up). ``select(timeout)`` returns what was
    collected since the last call and *never waits*: the driver awaits instead, for
    ``requested_wait`` seconds at most, the timeout the client asked ``select`` for
    (its own deadlines and the driver's folded in).

    A socket drained after the loop queued its callback is reported ready once more
    (a spurious readiness, as any level-triggered selector may give): the connection's
    reads and writes treat ``EAGAIN`` as "nothing now".

    Loop thread only.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, on_ready: Callable[[], None]) -> None:
        self._loop = loop
        self._on_ready = on_ready
        self._keys: dict[int, selectors.SelectorKey] = {}
        self._ready: dict[int, int] = {}
        self._closed = False
        #: The timeout of the last ``select`` call (None: wait for readiness only).
        self.requested_wait: float | None = None
        #: Whether the last ``select`` returned anything.
        self.had_events = False

    # ------------------------------------------------------------------ BaseSelector

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if self._closed:
            raise RuntimeError("selector is closed")
        if not events or events & ~(_READ | _WRITE):
            raise ValueError(f"invalid events: {events!r}")
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} (fd {fd}) is already registered")
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        self._watch(fd, 0, events)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = self._keys.pop(fd)
        self._watch(fd, key.events, 0)
        self._ready.pop(fd, None)
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        old = self._keys[fd]
        key = selectors.SelectorKey(old.fileobj, fd, events, data)
        self._keys[fd] = key
        self._watch(fd, old.events, events)
        if fd in self._ready:
            self._ready[fd] &= events
        return key

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.requested_wait = timeout
        ready, self._ready = self._ready, {}
        events = [(self._keys[fd], mask) for fd, mask in ready.items() if mask and fd in self._keys]
        self.had_events = bool(events)
        return events

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd, key in list(self._keys.items()):
            self._watch(fd, key.events, 0)
        self._keys.clear()
        self._ready.clear()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return _KeyMap(self._keys)

    # ------------------------------------------------------------------ the loop's side

    def _watch(self, fd: int, old: int, new: int) -> None:
        loop = self._loop
        if new & _READ and not old & _READ:
            loop.add_reader(fd, self._readable, fd)
        elif old & _READ and not new & _READ:
            loop.remove_reader(fd)
        if new & _WRITE and not old & _WRITE:
            loop.add_writer(fd, self._writable, fd)
        elif old & _WRITE and not new & _WRITE:
            loop.remove_writer(fd)

    def _readable(self, fd: int) -> None:
        self._mark(fd, _READ)

    def _writable(self, fd: int) -> None:
        self._mark(fd, _WRITE)

    def _mark(self, fd: int, mask: int) -> None:
        before = self._ready.get(fd, 0)
        self._ready[fd] = before | mask
        if not before:
            self._on_ready()


class LoopKafkaClient(KafkaClient):
    """``KafkaClient`` whose sockets are watched by an asyncio loop (``LoopSelector``).

    Its ``poll`` never blocks: it handles the readiness the loop reported, expires
    deadlines, reconnects and runs callbacks, and records in ``selector.requested_wait``
    how long it would have waited. ``wakeup()`` from the loop thread wakes the driver
    directly; from any other thread it writes the client's wake-up socket, which the
    loop watches like any other (still thread-safe).
    """

    def __init__(
        self,
        config: ClientConfig,
        loop: asyncio.AbstractEventLoop,
        on_ready: Callable[[], None],
    ) -> None:
        if not _has_readiness_callbacks(loop):
            raise ConfigurationError(
                f"AsyncConsumer needs an event loop with add_reader/add_writer "
                f"(the default loop on Unix, uvloop); {type(loop).__name__} has none"
            )
        super().__init__(config)
        self._loop_thread = threading.get_ident()
        self._on_ready = on_ready
        # The client built a selectors.DefaultSelector and registered its wake-up socket
        # on it; the loop takes both over (closing that selector leaves the socket open).
        self._selector.close()
        self.selector = LoopSelector(loop, on_ready)
        # The client and its connections use the BaseSelector interface only.
        self._selector = self.selector  # type: ignore[assignment]
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)

    def wakeup(self) -> None:
        """Make the driver run its next step promptly. Thread-safe."""
        if threading.get_ident() == self._loop_thread:
            self._on_ready()
        else:
            super().wakeup()


def _has_readiness_callbacks(loop: asyncio.AbstractEventLoop) -> bool:
    probe = getattr(loop, "add_reader", None)
    if probe is None:
        return False
    # ProactorEventLoop defines add_reader only to raise NotImplementedError.
    return not type(loop).__name__.startswith("Proactor")
