"""The librdkafka handle inside a confluent-kafka consumer, reached and validated.

confluent-kafka's Python binding exposes neither librdkafka's queue events
(``rd_kafka_queue_io_event_enable``, which ``aio._records_wakeup`` uses to wake an event
loop) nor a way to cut short a ``consume()`` another thread waits in
(``rd_kafka_queue_yield``, which ``_fetcher.Fetcher.wake`` uses). Both need the
``rd_kafka_t *`` that every confluent-kafka client object keeps right after its Python
object header (``Handle.rk`` in confluent-kafka's C source, unchanged since its first
release). That layout is confluent-kafka's private business, so every handle read is
validated before librdkafka is given it (``librdkafka_handle``): the pointer must lie
inside a readable mapping of this process (``/proc/self/maps``), ``rd_kafka_type`` must
say consumer, and ``rd_kafka_name`` must point inside the same object and read
``<client.id>#consumer-<n>``, the name librdkafka gives every consumer. A layout that
fails is ``HandleLayoutError`` (an ``IncompatibleVersionError`` naming the
confluent-kafka version); callers then do without (docs/architecture.md, "Threads and
what crosses between them"). The functions are called through ``ctypes`` in the librdkafka that
confluent-kafka has loaded (the library file mapped into this process), never another
copy; Linux only (``/proc/self/maps``), elsewhere ``loaded_librdkafka`` is None.

Imports the standard library and ``_errors``.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from typing import Final

from .._errors import IncompatibleVersionError

__all__ = ["HandleLayoutError", "consumer_queue", "librdkafka_handle", "loaded_librdkafka"]

#: ``rd_kafka_type_t``'s RD_KAFKA_CONSUMER.
_RD_KAFKA_CONSUMER: Final = 1
#: Where confluent-kafka's ``Handle`` keeps ``rd_kafka_t *rk``: right after the object
#: header (``PyObject_HEAD``), whose size ``object`` reports.
_RK_OFFSET: Final = object.__basicsize__
#: What must be readable from the handle for the calls below: ``rd_kafka_t`` is a few
#: kilobytes; ``rk_name`` is an array inside it.
_HANDLE_SPAN: Final = 4096
_NAME_SPAN: Final = 64 * 1024
_NAME_BYTES: Final = 128
#: librdkafka names every consumer ``<client.id>#consumer-<n>``.
_CONSUMER_NAME: Final = b"#consumer-"

_lib: ctypes.CDLL | None = None


class HandleLayoutError(IncompatibleVersionError):
    """The installed confluent-kafka does not keep librdkafka's handle where
    coopconsumer reads it (the layout of its private ``Handle`` changed), or the object
    is not a confluent-kafka consumer. Nothing was given to librdkafka."""


def loaded_librdkafka() -> ctypes.CDLL | None:
    """The librdkafka this process has loaded (confluent-kafka's), None if not found.

    Reads ``/proc/self/maps`` for the mapped file, so the handle is the same library
    object confluent-kafka uses (``dlopen`` of a loaded path returns it).
    """
    global _lib
    if _lib is not None:
        return _lib
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {
                line.split(None, 5)[5].strip()
                for line in maps
                if "librdkafka" in line and len(line.split(None, 5)) == 6
            }
    except OSError:
        return None
    for path in sorted(paths):
        if not os.path.isfile(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if not hasattr(lib, "rd_kafka_queue_io_event_enable"):
            continue
        lib.rd_kafka_type.restype = ctypes.c_int
        lib.rd_kafka_type.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_name.restype = ctypes.c_void_p
        lib.rd_kafka_name.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_queue_get_consumer.restype = ctypes.c_void_p
        lib.rd_kafka_queue_get_consumer.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_queue_io_event_enable.restype = None
        lib.rd_kafka_queue_io_event_enable.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        lib.rd_kafka_queue_destroy.restype = None
        lib.rd_kafka_queue_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_queue_yield.restype = None
        lib.rd_kafka_queue_yield.argtypes = [ctypes.c_void_p]
        _lib = lib
        return lib
    return None


def _readable_span(address: int, size: int) -> bool:
    """Whether ``[address, address + size)`` lies inside one readable mapping."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            for line in maps:
                span, perms = line.split(None, 2)[:2]
                start, _, end = span.partition("-")
                if int(start, 16) <= address and address + size <= int(end, 16):
                    return perms.startswith("r")
    except (OSError, ValueError):
        return False
    return False


def _is_confluent_consumer(client: object) -> bool:
    """Whether ``client`` is a ``confluent_kafka.Consumer`` (or a subclass), told
    without importing confluent-kafka here (only ``_io`` does)."""
    return any(
        cls.__name__ == "Consumer"
        # The C type is named ``cimpl.Consumer`` (its extension, confluent_kafka.cimpl).
        and (cls.__module__ == "cimpl" or cls.__module__.startswith("confluent_kafka"))
        for cls in type(client).__mro__
    )


def _versions(lib: ctypes.CDLL) -> str:
    try:
        client = importlib.metadata.version("confluent-kafka")
    except importlib.metadata.PackageNotFoundError:
        client = "(version unknown)"
    lib.rd_kafka_version_str.restype = ctypes.c_char_p
    native = lib.rd_kafka_version_str() or b"?"
    return f"confluent-kafka {client} (librdkafka {native.decode(errors='replace')})"


def librdkafka_handle(lib: ctypes.CDLL, client: object) -> int:
    """The ``rd_kafka_t *`` of ``client`` (a ``confluent_kafka.Consumer``), validated
    (see the module) before anything dereferences it. Raises ``HandleLayoutError``."""

    def refuse(why: str) -> HandleLayoutError:
        return HandleLayoutError(f"cannot reach librdkafka's handle in {_versions(lib)}: {why}")

    if not _is_confluent_consumer(client):
        raise refuse(f"{type(client).__name__} is not a confluent_kafka.Consumer")
    rk = ctypes.c_void_p.from_address(id(client) + _RK_OFFSET).value
    if not rk or not _readable_span(rk, _HANDLE_SPAN):
        raise refuse("the word after the object header is not a pointer into readable memory")
    if lib.rd_kafka_type(rk) != _RD_KAFKA_CONSUMER:
        raise refuse("the pointer after the object header is not a consumer handle")
    name = lib.rd_kafka_name(rk)
    if not name or not rk <= name < rk + _NAME_SPAN or not _readable_span(name, _NAME_BYTES):
        raise refuse("the handle's name is not inside it")
    text = ctypes.string_at(name, _NAME_BYTES).partition(b"\0")[0]
    if _CONSUMER_NAME not in text:
        raise refuse(f"the handle's name {text[:40]!r} is not a librdkafka consumer's")
    return rk


def consumer_queue(client: object) -> tuple[ctypes.CDLL, int] | None:
    """librdkafka and a new reference to the consumer queue of ``client`` (a
    ``confluent_kafka.Consumer``; the caller destroys it with
    ``rd_kafka_queue_destroy``), or None when librdkafka is not reachable here. Raises
    ``HandleLayoutError`` when the handle fails validation."""
    lib = loaded_librdkafka()
    if lib is None:
        return None
    queue = lib.rd_kafka_queue_get_consumer(librdkafka_handle(lib, client))
    return (lib, queue) if queue else None
