"""Secured test brokers: Tansu behind TLS, SASL or both, and throwaway certificates.

Tansu listens in plaintext on a private port and advertises the port of a
``SaslGateway`` in front of it, which terminates TLS (OpenSSL, through the standard
library), optionally checks client certificates, and does the broker side of SASL (SCRAM
by ``scramp``). Tansu's own TLS cannot be used: 0.6 declares ``--cert`` and ``--key`` in
one mutually exclusive argument group, so it refuses to start with both, and it needs
both. See ``_sasl_gateway`` for why its own SASL is not used either.

Certificates are made at test time by ``write_test_certificates`` (``trustme``, a test
dependency): a throwaway CA, a broker certificate for the given names and a client
certificate. No private key is ever committed.

Imports the standard library, attrs and the sibling testing modules; trustme and
cryptography lazily.
"""

from __future__ import annotations

import datetime
import secrets
import ssl
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ._broker import EmbeddedBroker
from ._ports import free_port
from ._readiness_probe import probe_api_versions
from ._sasl_gateway import SaslGateway, SaslServer
from ._tansu_broker import _TansuBroker, start_tansu

__all__ = ["TestCertificates", "TlsFiles", "start_secure_tansu", "write_test_certificates"]


@attrs.frozen(kw_only=True)
class TlsFiles:
    """PEM files of a TLS test broker.

    ``ca`` signed ``cert`` (the broker's chain, for the names clients use) and is what
    clients trust. With ``client_ca`` the broker requires client certificates signed by
    it (mutual TLS); ``admin_cert``/``admin_key`` are then what the harness itself
    presents (to create topics).
    """

    ca: str
    cert: str
    key: str
    client_ca: str | None = None
    admin_cert: str | None = None
    admin_key: str | None = None


@attrs.frozen(kw_only=True)
class TestCertificates:
    """Files written by :func:`write_test_certificates`."""

    __test__ = False  # not a pytest test class

    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    #: The client key encrypted with ``client_key_password`` (PKCS#8, PEM).
    client_key_encrypted: Path
    client_key_password: str = attrs.field(repr=False)

    def tls_files(self, *, require_client_cert: bool = False) -> TlsFiles:
        """The broker side of these certificates."""
        return TlsFiles(
            ca=str(self.ca),
            cert=str(self.server_cert),
            key=str(self.server_key),
            client_ca=str(self.ca) if require_client_cert else None,
            admin_cert=str(self.client_cert) if require_client_cert else None,
            admin_key=str(self.client_key) if require_client_cert else None,
        )


def write_test_certificates(
    directory: str | Path,
    *,
    hostnames: Sequence[str] = ("localhost", "127.0.0.1"),
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> TestCertificates:
    """A throwaway CA, a broker certificate for ``hostnames`` (valid from ``not_before``
    to ``not_after``; trustme's defaults otherwise) and a client certificate, as PEM
    files in ``directory``. Needs ``trustme`` (``pip install 'coopconsumer[test]'``)."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert(*hostnames, not_before=not_before, not_after=not_after)
    client = ca.issue_cert("coopconsumer-test-client@example.com", common_name="test-client")
    paths = {
        "ca": folder / "ca.pem",
        "server_cert": folder / "server.pem",
        "server_key": folder / "server.key",
        "client_cert": folder / "client.pem",
        "client_key": folder / "client.key",
        "client_key_encrypted": folder / "client-encrypted.key",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["server_cert"]))
    for extra in server.cert_chain_pems[1:]:
        extra.write_to_path(str(paths["server_cert"]), append=True)
    server.private_key_pem.write_to_path(str(paths["server_key"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client_cert"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    password = secrets.token_urlsafe(12)
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    paths["client_key_encrypted"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()),
        )
    )
    for path in paths.values():
        path.chmod(0o600)
    return TestCertificates(directory=folder, client_key_password=password, **paths)


class _SecuredTansu(EmbeddedBroker):
    kind = "tansu"

    def __init__(
        self,
        inner: _TansuBroker,
        *,
        bootstrap: str,
        api_versions: Mapping[int, tuple[int, int]],
        client_config: Mapping[str, object],
        gateway: SaslGateway | None,
    ) -> None:
        super().__init__(bootstrap=bootstrap, api_versions=api_versions)
        self._inner = inner
        self._client_config = dict(client_config)
        #: The TLS/SASL gateway in front of Tansu.
        self.gateway = gateway

    @property
    def client_config(self) -> dict[str, object]:
        return dict(self._client_config)

    @property
    def pid(self) -> int | None:
        return self._inner.pid

    @property
    def running(self) -> bool:
        return self._inner.running

    def output_tail(self, chars: int = 4000) -> str:
        return self._inner.output_tail(chars)

    def stop(self) -> None:
        try:
            if self.gateway is not None:
                self.gateway.stop()
        finally:
            self._inner.stop()


_ADMIN_USER = "coopconsumer-testing-admin"


def start_secure_tansu(
    *,
    tls: TlsFiles | None,
    sasl: SaslServer | None,
    startup_timeout_s: float,
) -> EmbeddedBroker:
    """Start Tansu secured by ``tls`` and/or ``sasl`` (see the module docstring)."""
    probe_ssl: ssl.SSLContext | None = None
    client_config: dict[str, object] = {"security.protocol": "plaintext"}
    if tls is not None:
        # The readiness probe checks that the gateway answers, not its certificate:
        # tests serve expired or misnamed ones on purpose.
        probe_ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        probe_ssl.check_hostname = False
        probe_ssl.verify_mode = ssl.CERT_NONE
        client_config = {"security.protocol": "ssl", "ssl.ca.location": tls.ca}
        if tls.admin_cert is not None and tls.admin_key is not None:
            probe_ssl.load_cert_chain(tls.admin_cert, tls.admin_key)
            client_config["ssl.certificate.location"] = tls.admin_cert
            client_config["ssl.key.location"] = tls.admin_key
    if sasl is None and tls is None:
        raise ValueError("start_secure_tansu needs tls or sasl")
    server = sasl or SaslServer(mechanisms=())
    if server.mechanisms:
        server, admin = _with_admin(server)
        protocol = "sasl_ssl" if tls is not None else "sasl_plaintext"
        client_config = {**client_config, "security.protocol": protocol, **admin}
    server_ssl: ssl.SSLContext | None = None
    if tls is not None:
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(tls.cert, tls.key)
        if tls.client_ca is not None:
            server_ssl.verify_mode = ssl.CERT_REQUIRED
            server_ssl.load_verify_locations(tls.client_ca)
    gateway = SaslGateway(
        server, upstream=("127.0.0.1", 0), ssl_context=server_ssl, port=free_port()
    )
    try:
        inner = start_tansu(startup_timeout_s=startup_timeout_s, advertised_port=gateway.port)
    except BaseException:
        gateway.stop()
        raise
    try:
        host, _, port = inner.bootstrap.rpartition(":")
        gateway.upstream = (host, int(port))
        gateway.start()
        deadline = time.monotonic() + startup_timeout_s
        while True:
            try:
                versions = probe_api_versions(gateway.address, ssl_context=probe_ssl)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        return _SecuredTansu(
            inner,
            bootstrap=gateway.address,
            api_versions=versions,
            client_config=client_config,
            gateway=gateway,
        )
    except BaseException:
        gateway.stop()
        inner.stop()
        raise


def _with_admin(server: SaslServer) -> tuple[SaslServer, dict[str, object]]:
    """Add the harness's own user (to create topics) with a mechanism the server
    enables; return the server and the admin's client keys."""
    password = secrets.token_urlsafe(16)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"):
        if mechanism in server.mechanisms:
            users = {**server.users, _ADMIN_USER: password}
            return attrs.evolve(server, users=users), {
                "sasl.mechanism": mechanism,
                "sasl.username": _ADMIN_USER,
                "sasl.password": password,
            }
    token = secrets.token_urlsafe(24)
    tokens = {**server.tokens, token: time.time() + 24 * 3600}
    expiry = time.time() + 24 * 3600
    return attrs.evolve(server, tokens=tokens), {
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (token, expiry),
    }
