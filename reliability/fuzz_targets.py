"""Fuzz targets: every decoder a broker or a group peer can reach, one family each.

A target takes arbitrary bytes and either returns or raises one of its family's
``allowed`` errors (the library's typed errors). Anything else is a fault. Targets
also check what must hold when the bytes do parse (decode, encode, decode again gives
the same message; the sticky user-data fast path agrees with the schema decoder; an
assignor fed a peer's bytes still assigns every partition once).

Used by ``reliability/fuzz.py`` (atheris, coverage-guided, millions of inputs) and by
the short pass in ``tests/protocol/test_fuzz_campaign_short.py`` (a bounded loop over
the seeds and their mutations). Imports no fuzzing engine. See reliability/README.md.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import random
import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

import attrs

from coopconsumer import TopicPartition
from coopconsumer._errors import (
    AuthenticationError,
    BrokerConnectionError,
    KafkaError,
    ProtocolError,
)
from coopconsumer._io import BrokerConnection, ConnectionState, PendingRequest
from coopconsumer._protocol import (
    Response,
    Struct,
    decode,
    decode_request,
    decode_response,
    encode,
    encode_response,
)
from coopconsumer._protocol._schema import field_meta
from coopconsumer._protocol.consumer_protocol_schemas import decode_sticky_assignor_user_data
from coopconsumer._protocol.messages import (
    ALL_RESPONSES,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
    HeartbeatRequest,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from coopconsumer._security._sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    ScramMechanism,
    scram_salted_password,
)
from coopconsumer.assignors import (
    ClusterMetadata,
    CooperativeStickyAssignor,
    GroupSubscription,
    StickyAssignor,
    Subscription,
)
from coopconsumer.assignors._sticky_userdata import (
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
    encode_sticky_user_data_v0,
)
from coopconsumer.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

__all__ = [
    "FAMILIES",
    "RESPONSE_CASES",
    "Family",
    "Fault",
    "close_stream_harness",
    "giant_length_inputs",
    "mutations",
    "sample",
]


class Fault(AssertionError):
    """A target found bytes that break a promise (wrong error type, disagreeing
    decoders, an invalid assignment)."""


@attrs.frozen
class Family:
    """One decoder family: a target, its seeds, and the typed errors it may raise."""

    name: str
    what: str
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    allowed: tuple[type[BaseException], ...]


# ----------------------------------------------------------------------------- samples


def _sample_scalar(type_: str, index: int) -> Any:
    if type_ in ("int8", "int16", "uint16", "int32", "int64"):
        return index + 1
    if type_ == "float64":
        return 0.5
    if type_ == "bool":
        return True
    if type_ == "string":
        return f"s{index}"
    if type_ == "uuid":
        return uuid.UUID(int=index + 1)
    return bytes([index % 256]) * 3  # bytes, records


def sample(cls: type[Struct], version: int, *, width: int = 2) -> Any:
    """An instance of ``cls`` with every field present at ``version`` set to a
    non-default value and every array holding ``width`` elements: a seed that walks
    each field's reader, tagged fields included."""
    values: dict[str, Any] = {}
    for index, field in enumerate(attrs.fields(cls)):  # type: ignore[arg-type]
        meta = field_meta(field)
        if meta is None or version not in meta.versions:
            continue
        type_ = meta.type
        if isinstance(type_, str):
            items = [_sample_scalar(type_, index + i) for i in range(width)]
        else:
            items = [sample(type_, version, width=1) for _ in range(width)]
        values[field.name] = tuple(items) if meta.array else items[0]
    return cls(**values)


RESPONSE_CASES: Final[tuple[tuple[type[Response], int], ...]] = tuple(
    (cls, version)
    for cls in ALL_RESPONSES.values()
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
)


def _response_frames() -> Iterator[tuple[int, bytes]]:
    for index, (cls, version) in enumerate(RESPONSE_CASES):
        for msg in (cls(), sample(cls, version)):
            try:
                yield index, encode_response(msg, api_version=version, correlation_id=7)
            except ProtocolError:
                continue


# ----------------------------------------------------------------------------- responses


def _run_response_frame(data: bytes) -> None:
    if not data:
        return
    cls, version = RESPONSE_CASES[data[0] % len(RESPONSE_CASES)]
    frame = data[1:]
    correlation_id, response = decode_response(cls, frame, api_version=version)
    # What parsed must survive a round trip through our own encoder unchanged
    # (ApiVersions may have been read as v0, KIP-511).
    at = version
    if type(response) is ApiVersionsResponse and version > 0:
        try:
            decode(ApiVersionsResponse, frame[4:], version)
        except ProtocolError:
            at = 0
    again = encode_response(response, api_version=at, correlation_id=correlation_id)
    _cid, reread = decode_response(cls, again, api_version=at)
    if reread != response:
        raise Fault(f"{cls.__name__} v{version}: decode(encode(x)) != x")


def _response_seeds() -> list[bytes]:
    return [bytes([index]) + frame for index, frame in _response_frames()]


# ----------------------------------------------------------------------------- stream


_HEARTBEAT_VERSIONS: Final = 5


class _StreamHarness:
    """A real ``BrokerConnection`` on loopback whose broker side is this harness: the
    fuzz input is the byte stream a broker sends back for 1-4 pipelined requests. It
    reaches the 4-byte size prefix reader, the correlation-id bookkeeping and the
    response decoders, and checks every request ends with a response or a typed error.
    """

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._port = self._listener.getsockname()[1]
        self._conn: BrokerConnection | None = None
        self._peer: socket.socket | None = None
        self.reconnects = 0
        versions = ApiVersionsResponse(
            api_keys=(
                ApiVersionsResponseApiVersion(api_key=18, min_version=0, max_version=3),
                ApiVersionsResponseApiVersion(
                    api_key=HeartbeatRequest.API_KEY,
                    min_version=0,
                    max_version=_HEARTBEAT_VERSIONS - 1,
                ),
            )
        )
        self._versions = versions
        # The connection logs every request it could not complete: fuzz.py's child
        # process silences the library's loggers (a target must not change a process-
        # wide setting: the test suite's short pass runs it beside other tests).

    def close(self) -> None:
        self._drop()
        self._listener.close()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._peer is not None:
            self._peer.close()
            self._peer = None

    def _ready(self) -> BrokerConnection:
        conn = self._conn
        if conn is not None and conn.state is ConnectionState.READY:
            return conn
        self._drop()
        self.reconnects += 1
        conn = self._conn = BrokerConnection(
            "127.0.0.1", self._port, request_timeout_ms=60_000, connection_setup_timeout_ms=60_000
        )
        peer, _addr = self._listener.accept()
        self._peer = peer
        peer.setblocking(True)
        for _ in range(100):
            conn.poll(0.01)
            if conn.in_flight_count:
                break
        header, _request = decode_request(self._read_frame(peer))
        body = encode_response(
            self._versions, api_version=header.api_version, correlation_id=header.correlation_id
        )
        peer.sendall(struct.pack(">i", len(body)) + body)
        for _ in range(100):
            conn.poll(0.01)
            if conn.state is not ConnectionState.NEGOTIATING:
                break
        if conn.state is not ConnectionState.READY:
            raise RuntimeError(f"harness connection did not become ready: {conn.close_error!r}")
        return conn

    @staticmethod
    def _read_frame(peer: socket.socket) -> bytes:
        def exactly(n: int) -> bytes:
            out = b""
            while len(out) < n:
                chunk = peer.recv(n - len(out))
                if not chunk:
                    raise RuntimeError("harness peer closed")
                out += chunk
            return out

        (size,) = struct.unpack(">i", exactly(4))
        return exactly(size)

    def run(self, data: bytes) -> None:
        if not data:
            return
        conn = self._ready()
        peer = self._peer
        assert peer is not None
        control = data[0]
        count = 1 + (control & 3)
        version = (control >> 2) % _HEARTBEAT_VERSIONS
        framed = control & 0x80
        futures: list[PendingRequest[Any]] = [
            conn.send(HeartbeatRequest(group_id="g", member_id="m"), api_version=version)
            for _ in range(count)
        ]
        conn.poll(0)
        ids = [decode_request(self._read_frame(peer))[0].correlation_id for _ in range(count)]
        rest = data[1:]
        if framed:
            # Well-framed responses with the right correlation ids around fuzzed
            # bodies: each body is a length byte and that many bytes.
            stream = bytearray()
            for correlation_id in ids:
                if not rest:
                    break
                n, body, rest = rest[0], rest[1 : 1 + rest[0]], rest[1 + rest[0] :]
                del n
                header = struct.pack(">i", correlation_id) + (b"\x00" if version >= 4 else b"")
                stream += struct.pack(">i", len(header) + len(body)) + header + body
            stream += rest
        else:
            stream = bytearray(rest)
        if stream:
            peer.sendall(stream)
        for _ in range(50):
            conn.poll(0)
            if conn.state is ConnectionState.CLOSED or all(f.done() for f in futures):
                break
        if not all(f.done() for f in futures):
            # The stream ended inside a frame: the connection is waiting for the rest,
            # as it should. Closing fails what is left.
            self._drop()
        for future in futures:
            if not future.done():
                raise Fault("a request is neither answered nor failed after close()")
            _check_typed(future.exception())
        if conn.close_error is not None:
            _check_typed(conn.close_error)


def _check_typed(error: BaseException | None) -> None:
    if error is None:
        return
    if not isinstance(error, ProtocolError | BrokerConnectionError | KafkaError):
        raise Fault(f"untyped connection error {type(error).__name__}: {error}") from error
    if "internal error" in str(error):
        raise Fault(f"the connection hit an internal error: {error!r}") from error


_STREAM: list[_StreamHarness] = []


def _run_stream(data: bytes) -> None:
    if not _STREAM:
        _STREAM.append(_StreamHarness())
    _STREAM[0].run(data)


def close_stream_harness() -> None:
    """Close the loopback sockets of the stream family (idempotent)."""
    while _STREAM:
        _STREAM.pop().close()


def _stream_seeds() -> list[bytes]:
    out = []
    for version in range(_HEARTBEAT_VERSIONS):
        body = encode(sample(HeartbeatRequest.RESPONSE_TYPE, version), version)
        control = (version << 2) | 0x80 | 1
        out.append(bytes([control, len(body)]) + body + bytes([len(body)]) + body)
        header_len = 5 if version >= 4 else 4
        frame = struct.pack(">ii", header_len + len(body), 0) + (b"\x00" if version >= 4 else b"")
        out.append(bytes([version << 2]) + frame + body)
    out.append(b"\x00\x7f\xff\xff\xff")  # a size prefix of 2 GiB - 1
    out.append(b"\x00\x80\x00\x00\x00")  # negative size
    return out


# ----------------------------------------------------------------------------- consumer protocol


def _run_consumer_protocol(data: bytes) -> None:
    if not data:
        return
    raw = data[1:]
    try:
        if data[0] & 1:
            assignment = decode_assignment(raw, member_id="fuzz-member")
            once = decode_assignment(encode_assignment(assignment))
            if decode_assignment(encode_assignment(once)) != once:
                raise Fault("assignment: encoding is not stable after one round trip")
        else:
            subscription = decode_subscription(raw, member_id="fuzz-member")
            one = decode_subscription(encode_subscription(subscription))
            if decode_subscription(encode_subscription(one)) != one:
                raise Fault("subscription: encoding is not stable after one round trip")
    except ProtocolError as exc:
        if exc.member_id not in (None, "fuzz-member"):
            raise Fault(f"error names the wrong member: {exc.member_id!r}") from exc
        raise


def _consumer_protocol_seeds() -> list[bytes]:
    tps = (TopicPartition("orders", 0), TopicPartition("orders", 3), TopicPartition("pay", 1))
    sub = Subscription(
        topics=("orders", "pay"),
        user_data=b"\x00\x00\x00\x05",
        owned_partitions=tps,
        generation_id=9,
        rack_id="rack-a",
    )
    from coopconsumer.assignors import Assignment

    v3_sub = encode_subscription(sub)
    v3_asg = encode_assignment(Assignment(partitions=tps, user_data=b"ud"))
    out = [b"\x00" + v3_sub, b"\x01" + v3_asg]
    for version in (0, 1, 2, 7):
        out.append(b"\x00" + struct.pack(">h", version) + v3_sub[2:])
        out.append(b"\x01" + struct.pack(">h", version) + v3_asg[2:])
    return out


# ----------------------------------------------------------------------------- sticky user data

_TOPICS: Final = {"orders": 4, "pay": 2}
_METADATA: Final = ClusterMetadata(partition_counts=_TOPICS)
_ALL_PARTITIONS: Final = frozenset(
    TopicPartition(t, p) for t, n in _TOPICS.items() for p in range(n)
)


def _run_sticky(data: bytes) -> None:
    if not data:
        return
    mode, raw = data[0] % 5, data[1:]
    if mode == 0:
        # The fast reader and the schema decoder must agree on every input.
        try:
            fast: tuple[list[TopicPartition], int] | ProtocolError = decode_sticky_user_data(raw)
        except ProtocolError as exc:
            fast = exc
        try:
            decoded = decode_sticky_assignor_user_data(raw)
            slow: tuple[list[TopicPartition], int] | ProtocolError = (
                [
                    TopicPartition(entry.topic, p)
                    for entry in decoded.previous_assignment
                    for p in entry.partitions
                ],
                decoded.generation,
            )
        except ProtocolError as exc:
            slow = exc
        if isinstance(fast, ProtocolError) != isinstance(slow, ProtocolError) or (
            not isinstance(fast, ProtocolError) and fast != slow
        ):
            raise Fault(f"sticky user data readers disagree: fast={fast!r} schema={slow!r}")
        if isinstance(fast, ProtocolError):
            raise fast
    elif mode == 1:
        decode_cooperative_generation(raw)
    elif mode == 2:
        # The assignors' readers swallow a peer's bad bytes (Java does): never raise.
        sub = Subscription(topics=tuple(_TOPICS), user_data=raw)
        StickyAssignor.member_data("fuzz-member", sub)
        CooperativeStickyAssignor.member_data("fuzz-member", sub)
    elif mode == 3:
        _assign_with_peer_user_data(raw)
    else:
        _assign_with_peer_subscription(raw)


def _assign_with_peer_user_data(raw: bytes) -> None:
    good = encode_sticky_user_data([TopicPartition("orders", 0), TopicPartition("pay", 1)], 3)
    subs = {
        "a": Subscription(topics=tuple(_TOPICS), user_data=good),
        "b": Subscription(topics=tuple(_TOPICS)),
        "fuzz-member": Subscription(topics=tuple(_TOPICS), user_data=raw),
    }
    result = StickyAssignor().assign(_METADATA, GroupSubscription(subscriptions=subs))
    _check_assignment(result.assignments, subs, complete=True)


def _assign_with_peer_subscription(raw: bytes) -> None:
    """The leader's path for a cooperative peer: its JoinGroup metadata bytes, decoded,
    then cooperative-sticky over them."""
    try:
        peer = decode_subscription(raw, member_id="fuzz-member")
    except ProtocolError:
        return
    subs = {
        "a": Subscription(
            topics=tuple(_TOPICS),
            owned_partitions=(TopicPartition("orders", 1), TopicPartition("pay", 0)),
            generation_id=4,
            user_data=encode_cooperative_generation(4),
        ),
        "fuzz-member": peer,
    }
    result = CooperativeStickyAssignor().assign(_METADATA, GroupSubscription(subscriptions=subs))
    _check_assignment(result.assignments, subs, complete=False)


def _check_assignment(assignments: Any, subs: dict[str, Subscription], *, complete: bool) -> None:
    seen: dict[TopicPartition, str] = {}
    for member, assignment in assignments.items():
        for tp in assignment.partitions:
            if tp in seen:
                raise Fault(f"{tp} assigned to both {seen[tp]} and {member}")
            if tp not in _ALL_PARTITIONS:
                raise Fault(f"{member} got {tp}, which does not exist")
            if tp.topic not in subs[member].topics:
                raise Fault(f"{member} got {tp} of a topic it did not subscribe to")
            seen[tp] = member
    if complete:
        wanted = {tp for tp in _ALL_PARTITIONS if any(tp.topic in s.topics for s in subs.values())}
        if set(seen) != wanted:
            raise Fault(f"partitions left unassigned: {sorted(wanted - set(seen))}")


def _sticky_seeds() -> list[bytes]:
    tps = [TopicPartition("orders", 2), TopicPartition("orders", 3), TopicPartition("pay", 0)]
    v1 = encode_sticky_user_data(tps, 5)
    v0 = encode_sticky_user_data_v0(tps)
    sub = encode_subscription(
        Subscription(
            topics=tuple(_TOPICS),
            owned_partitions=(TopicPartition("orders", 1),),
            generation_id=4,
            user_data=encode_cooperative_generation(4),
        )
    )
    out = []
    for mode in range(4):
        out += [bytes([mode]) + v1, bytes([mode]) + v0, bytes([mode]) + b"\x00\x00\x00\x07"]
    out.append(b"\x04" + sub)
    return out


# ----------------------------------------------------------------------------- SASL

_NONCE: Final = "fyko+d2lbbFgONRv9qkxdawL"
_SALT: Final = b"salt-of-sixteen!"
_SERVER_NONCE: Final = _NONCE + "3rfcNHYJY1ZVvWVs7j"


def _server_first(iterations: int = 4096) -> bytes:
    salt = base64.b64encode(_SALT).decode()
    return f"r={_SERVER_NONCE},s={salt},i={iterations}".encode()


def _scram() -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=_NONCE)


def _prepared_final() -> tuple[ScramMechanism, bytes]:
    """A mechanism waiting for the server-final message, and the right one."""
    mechanism = _scram()
    mechanism.start()
    client_final = mechanism.step(_server_first())
    assert client_final is not None
    salted = scram_salted_password("sha256", "pencil", _SALT, 4096)
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    without_proof = client_final.rsplit(b",p=", 1)[0]
    auth = b"n=user,r=" + _NONCE.encode() + b"," + _server_first() + b"," + without_proof
    signature = hmac.new(server_key, auth, hashlib.sha256).digest()
    return mechanism, b"v=" + base64.b64encode(signature)


_PREPARED: list[ScramMechanism] = []


def _run_sasl(data: bytes) -> None:
    if not data:
        return
    mode, raw = data[0] % 6, data[1:]
    if mode == 0:
        mechanism = _scram()
        mechanism.start()
        mechanism.step(raw)
    elif mode == 1:
        if not _PREPARED:
            _PREPARED.append(_prepared_final()[0])
        final = copy.copy(_PREPARED[0])
        final.step(raw)
        if not final.complete:
            raise Fault("SCRAM step returned without completing or raising")
    elif mode == 2:
        oauth = OAuthBearerMechanism("token")
        oauth.start()
        answer = oauth.step(raw)
        if answer not in (None, b"\x01"):
            raise Fault(f"OAUTHBEARER answered {answer!r}")
    elif mode == 3:
        plain = PlainMechanism("user", "pencil")
        plain.start()
        plain.step(raw)
    else:
        # The broker's SaslHandshake / SaslAuthenticate responses (header and body),
        # then the auth bytes into a SCRAM exchange, as the connection does.
        cls: type[Response] = SaslHandshakeResponse if mode == 4 else SaslAuthenticateResponse
        version = (data[0] // 6) % (cls.MAX_VERSION + 1)
        _cid, response = decode_response(cls, raw, api_version=version)
        if isinstance(response, SaslAuthenticateResponse):
            mechanism = _scram()
            mechanism.start()
            mechanism.step(response.auth_bytes)


def _sasl_seeds() -> list[bytes]:
    _mechanism, server_final = _prepared_final()
    handshake = encode_response(
        SaslHandshakeResponse(mechanisms=("SCRAM-SHA-256", "PLAIN")),
        api_version=1,
        correlation_id=3,
    )
    authenticate = encode_response(
        SaslAuthenticateResponse(auth_bytes=_server_first(), session_lifetime_ms=1000),
        api_version=2,
        correlation_id=4,
    )
    return [
        b"\x00" + _server_first(),
        b"\x00" + b"e=invalid-proof",
        b"\x01" + server_final,
        b"\x01" + b"e=other-error",
        b"\x02" + b'{"status":"invalid_token","scope":"a b"}',
        b"\x02",
        b"\x03",
        bytes([4 + 6]) + handshake,
        bytes([5 + 12]) + authenticate,
    ]


# ----------------------------------------------------------------------------- families

FAMILIES: Final[dict[str, Family]] = {
    family.name: family
    for family in (
        Family(
            "response-frames",
            f"header + body of all {len(RESPONSE_CASES)} response versions (ALL_RESPONSES)",
            _run_response_frame,
            _response_seeds,
            (ProtocolError,),
        ),
        Family(
            "stream",
            "size-prefixed byte stream into a BrokerConnection on loopback",
            _run_stream,
            _stream_seeds,
            (),
        ),
        Family(
            "consumer-protocol",
            "ConsumerProtocol Subscription / Assignment (v0-v3, higher read as v3)",
            _run_consumer_protocol,
            _consumer_protocol_seeds,
            (ProtocolError,),
        ),
        Family(
            "sticky-userdata",
            "sticky / cooperative-sticky user data, the assignors' readers and assign()",
            _run_sticky,
            _sticky_seeds,
            (ProtocolError,),
        ),
        Family(
            "sasl",
            "SCRAM server-first/final, OAUTHBEARER, PLAIN, SaslHandshake/Authenticate frames",
            _run_sasl,
            _sasl_seeds,
            (AuthenticationError, ProtocolError),
        ),
    )
}


def mutations(seed: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    """Cheap mutations of ``seed`` for the short pass: bit flips, truncations, byte
    runs, and 32-bit windows set to huge lengths (2^31 - 1, -2^31, -2)."""
    huge = (b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe", b"\xff\xff\xff\x0f")
    for _ in range(count):
        data = bytearray(seed)
        for _step in range(rng.randint(1, 4)):
            choice = rng.randrange(5)
            if choice == 0 and len(data) > 1:
                bit = rng.randrange(8, len(data) * 8)
                data[bit // 8] ^= 1 << (bit % 8)
            elif choice == 1 and len(data) > 1:
                del data[rng.randrange(1, len(data)) :]
            elif choice == 2:
                at = rng.randrange(1, len(data) + 1) if data else 0
                data[at:at] = bytes([rng.randrange(256)]) * rng.randint(1, 40)
            elif choice == 3 and len(data) > 5:
                at = rng.randrange(1, len(data) - 3)
                data[at : at + 4] = rng.choice(huge)
            elif data:
                at = rng.randrange(1, len(data)) if len(data) > 1 else 0
                data[at] = rng.randrange(256)
        yield bytes(data)


def giant_length_inputs(seed: bytes) -> Iterator[bytes]:
    """Every 16- and 32-bit window of ``seed`` (past the selector byte) set to the
    largest lengths a field can declare, and every position given a 5-byte varint of
    2^32 - 1: the inputs that would allocate gigabytes if a reader trusted a length."""
    for at in range(1, len(seed)):
        for window in (b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x7f\xff"):
            yield seed[:at] + window + seed[at + len(window) :]
        yield seed[:at] + b"\xff\xff\xff\xff\x0f" + seed[at + 1 :]
