"""Which version of an API a session speaks, and how APIs are named in errors.

``choose_version`` is the one rule: the highest version both sides support
(docs/architecture.md, "Where each Kafka rule lives"). Also the ApiVersions version
tried first and the client software name and version a session announces (KIP-511).

Pure: the standard library (``importlib.metadata`` reads the installed version once, on
the first handshake: importing it costs more than the rest of the session layer),
``_errors`` and ``_protocol``.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from .._errors import KafkaError
from .._protocol import error_codes
from .._protocol._schema import Request, Response
from .._protocol.messages import ApiVersionsRequest

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "FIRST_API_VERSIONS_VERSION",
    "api_name",
    "choose_version",
    "client_software_version",
    "unsupported_version",
]

#: ApiVersions version tried first (KIP-511); the fallback is the broker's advertised
#: maximum for ApiVersions when it tells us, else v0.
FIRST_API_VERSIONS_VERSION: Final = min(3, ApiVersionsRequest.MAX_VERSION)


@functools.cache
def client_software_version() -> str:
    """The installed coopconsumer's version as KIP-511 allows it, read once."""
    import importlib.metadata

    try:
        raw = importlib.metadata.version("coopconsumer")
    except importlib.metadata.PackageNotFoundError:
        raw = "0"
    # KIP-511 restricts the value to [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    cleaned = re.sub(r"[^a-zA-Z0-9.\-]", "-", raw).strip(".-")
    return cleaned or "0"


CLIENT_SOFTWARE_NAME: Final = "coopconsumer"


def api_name(request_type: type[Request] | type[Response]) -> str:
    """``JoinGroupRequest`` -> ``"JoinGroup"``."""
    name = request_type.__name__
    for suffix in ("Request", "Response"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def choose_version(
    request_type: type[Request],
    broker_versions: tuple[int, int] | None,
    *,
    broker: str | None = None,
) -> int:
    """The version to speak for ``request_type`` given the broker's ``(min, max)``.

    The highest version both sides support: ``min(ours.max, broker.max)``, which must be
    ``>= max(ours.min, broker.min)``. Raises ``KafkaError`` UNSUPPORTED_VERSION (35)
    naming the API when the ranges do not overlap or the broker lacks the API.
    """
    ours = (request_type.MIN_VERSION, request_type.MAX_VERSION)
    name = api_name(request_type)
    if broker_versions is None:
        raise unsupported_version(
            request_type,
            f"broker does not support {name} (api_key {request_type.API_KEY}) at all;"
            f" this client speaks v{ours[0]}-{ours[1]}",
            broker,
        )
    version = min(ours[1], broker_versions[1])
    if version < max(ours[0], broker_versions[0]):
        raise unsupported_version(
            request_type,
            f"no common {name} version (api_key {request_type.API_KEY}): this client"
            f" speaks v{ours[0]}-{ours[1]}, the broker v{broker_versions[0]}-"
            f"{broker_versions[1]}",
            broker,
        )
    return version


def unsupported_version(
    request_type: type[Request], message: str, broker: str | None
) -> KafkaError:
    """UNSUPPORTED_VERSION (35) for ``request_type``, with ``message``."""
    return error_codes.to_exception(
        error_codes.UNSUPPORTED_VERSION,
        api_key=request_type.API_KEY,
        api_version=None,
        broker=broker,
        message=message,
    )
