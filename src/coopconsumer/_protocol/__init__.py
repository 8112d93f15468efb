"""Kafka wire protocol: schema-driven messages and one generic codec. Pure, no I/O.

Must not import anything from the package except ``coopconsumer._errors`` (a leaf), so
that every other layer can depend on it; the import-direction test enforces this.
It stays general: consumer-group APIs today, admin APIs later.

- :func:`encode` / :func:`decode`: a message body at a version.
- :func:`encode_request` / :func:`decode_response` / :func:`peek_correlation_id`:
  with headers, without the 4-byte size prefix.
- :func:`decode_request` / :func:`encode_response`: the broker side, for fakes.
- :mod:`.messages`: the request/response classes (generated from Kafka's JSON specs by
  :mod:`._generate`); :mod:`.consumer_protocol_schemas`: the consumer protocol and assignor
  user-data schemas; :mod:`.errors`: Kafka's error table.
"""

from . import error_codes as errors
from ._codec import EncodeError as EncodeError
from ._codec import decode as decode
from ._codec import encode as encode
from ._framing import RequestHeader as RequestHeader
from ._framing import decode_request as decode_request
from ._framing import decode_response as decode_response
from ._framing import encode_request as encode_request
from ._framing import encode_response as encode_response
from ._framing import peek_correlation_id as peek_correlation_id
from ._framing import request_header_version as request_header_version
from ._framing import response_header_version as response_header_version
from ._schema import Request as Request
from ._schema import Response as Response
from ._schema import Struct as Struct

__all__ = [
    "EncodeError",
    "Request",
    "RequestHeader",
    "Response",
    "Struct",
    "decode",
    "decode_request",
    "decode_response",
    "encode",
    "encode_request",
    "encode_response",
    "errors",
    "peek_correlation_id",
    "request_header_version",
    "response_header_version",
]
