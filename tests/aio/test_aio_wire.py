"""The wire client on an event loop (``LoopSelector``, ``LoopKafkaClient``) against the
fake broker: the unchanged connection pump and broker session, driven by the loop's
readiness callbacks, with TLS and SASL; the selector never blocks."""

from __future__ import annotations

import asyncio
import selectors
import socket
from typing import Any

import pytest
import trustme
from _fake_broker import FakeBroker
from _fake_secure import SASL_VERSIONS, PlainSasl, TlsFakeBroker, server_context

from coopconsumer import AuthenticationError, ConfigurationError
from coopconsumer._io import PendingRequest
from coopconsumer._io._client import ClientConfig
from coopconsumer._protocol.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from coopconsumer._security import SecurityConfig
from coopconsumer.aio._loop_client import LoopKafkaClient, LoopSelector
from coopconsumer.aio._signal import Signal

WAIT_S = 10.0


async def until_done(client: LoopKafkaClient, signal: Signal, *futures: PendingRequest[Any]) -> int:
    """Pump ``client`` as ``LoopDriver`` does (poll without blocking, then await the
    loop's wake-up or the wait the client asked for); returns how many awaits slept."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not all(f.done() for f in futures):
        assert loop.time() < deadline, f"not done: {futures}"
        client.poll(1.0)
        wait = client.selector.requested_wait
        await signal.wait(1.0 if wait is None else min(wait, 1.0))
    return signal.sleeps


def test_select_reports_what_the_loop_saw_and_never_waits() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        woken: list[int] = []
        selector = LoopSelector(loop, lambda: woken.append(1))
        a, b = socket.socketpair()
        try:
            a.setblocking(False)
            key = selector.register(a, selector_read(), "conn")
            assert selector.select(5.0) == []  # returns at once
            assert selector.requested_wait == 5.0
            b.send(b"x")
            for _ in range(100):
                if woken:
                    break
                await asyncio.sleep(0.01)
            assert woken == [1]
            ready = selector.select(0)
            assert [(k.data, mask) for k, mask in ready] == [("conn", selector_read())]
            assert selector.had_events
            # Level-triggered like a selector: unread data is reported again.
            await asyncio.sleep(0.01)
            assert [k.fd for k, _ in selector.select(0)] == [key.fd]
            a.recv(10)
            # A readiness callback the loop had already queued may still report it once
            # (spurious, as after any level-triggered select; the pump gets EAGAIN).
            await asyncio.sleep(0.01)
            selector.select(0)
            selector.modify(a, selector_read() | selector_write(), "conn")
            await asyncio.sleep(0.01)
            masks = [mask for _, mask in selector.select(0)]
            assert masks == [selector_write()]  # writable, nothing to read
            selector.unregister(a)
            b.send(b"y")
            await asyncio.sleep(0.01)
            assert selector.select(0) == []
            assert not selector.get_map()
        finally:
            selector.close()
            a.close()
            b.close()

    asyncio.run(main())


def selector_read() -> int:
    return selectors.EVENT_READ


def selector_write() -> int:
    return selectors.EVENT_WRITE


def make_client(broker: FakeBroker, signal: Signal, **settings: Any) -> LoopKafkaClient:
    config = ClientConfig.from_bootstrap(broker.bootstrap, **settings)
    return LoopKafkaClient(config, asyncio.get_running_loop(), signal.set)


def test_metadata_through_the_loop() -> None:
    async def main() -> None:
        signal = Signal()
        with FakeBroker() as broker:
            broker.topics["orders"] = 3
            client = make_client(broker, signal)
            try:
                future = client.send(-1, MetadataRequest(topics=None))
                sleeps = await until_done(client, signal, future)
                assert future.exception() is None
                names = [t.name for t in future.result().topics]
                assert names == ["orders"]
                # Woken by the loop, not by spinning: a handful of awaits at most.
                assert sleeps < 20
            finally:
                client.close()
            assert not client.selector.get_map()  # every socket left the loop

    asyncio.run(main())


def test_requests_from_another_thread_wake_the_loop() -> None:
    async def main() -> None:
        signal = Signal()
        with FakeBroker() as broker:
            client = make_client(broker, signal)
            try:
                loop = asyncio.get_running_loop()
                # wakeup() from a thread writes the client's wake-up socket, which the
                # loop watches: the awaiting side returns long before its timeout.
                loop.call_later(0.05, lambda: loop.run_in_executor(None, client.wakeup))
                start = loop.time()
                client.poll(0)
                await signal.wait(5.0)
                assert loop.time() - start < 2.0
            finally:
                client.close()

    asyncio.run(main())


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def test_tls_and_sasl_run_in_the_same_session_on_the_loop(ca: trustme.CA) -> None:
    async def main() -> None:
        signal = Signal()
        sasl = PlainSasl({"alice": "pw"})
        with TlsFakeBroker(server_context(ca), versions=SASL_VERSIONS) as broker:
            sasl.install(broker)
            security = SecurityConfig(
                security_protocol="sasl_ssl",
                ssl_ca_pem=ca.cert_pem.bytes().decode(),
                sasl_mechanism="PLAIN",
                sasl_username="alice",
                sasl_password="pw",
            )
            client = make_client(broker, signal, security=security)
            try:
                future = client.send(-1, MetadataRequest(topics=None))
                await until_done(client, signal, future)
                assert future.exception() is None
                assert sasl.authentications == 1
            finally:
                client.close()
        keys = [key for key, _version in broker.received_keys()]
        assert keys[:4] == [18, SaslHandshakeRequest.API_KEY, SaslAuthenticateRequest.API_KEY, 3]

    asyncio.run(main())


def test_refused_credentials_are_the_sessions_authentication_error() -> None:
    async def main() -> None:
        signal = Signal()
        sasl = PlainSasl({"alice": "pw"})
        with FakeBroker(versions=SASL_VERSIONS) as broker:
            sasl.install(broker)
            security = SecurityConfig(
                security_protocol="sasl_plaintext",
                sasl_mechanism="PLAIN",
                sasl_username="alice",
                sasl_password="wrong",
            )
            client = make_client(broker, signal, security=security)
            try:
                future = client.send(-1, MetadataRequest(topics=None))
                await until_done(client, signal, future)
                error = future.exception()
                assert isinstance(error, AuthenticationError)
                assert "Invalid username or password" in str(error)
            finally:
                client.close()

    asyncio.run(main())


def test_a_proactor_like_loop_is_refused_clearly() -> None:
    class ProactorEventLoop(asyncio.SelectorEventLoop):
        """Named as Windows' loop, whose add_reader raises NotImplementedError."""

    loop = ProactorEventLoop()
    try:
        with pytest.raises(ConfigurationError, match="add_reader"):
            LoopKafkaClient(ClientConfig.from_bootstrap("127.0.0.1:9"), loop, lambda: None)
    finally:
        loop.close()
