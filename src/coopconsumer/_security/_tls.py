"""TLS contexts: ``build_ssl_context`` turns a ``SecurityConfig`` into an ``ssl.SSLContext``.

Built once per client: certificate files and PEM text are read here, so a bad file, PEM
or key password is a ``ConfigurationError`` naming the key, raised when the consumer is
constructed. (Why a TLS handshake failed is said by the broker session:
``_session/_tls_pipe.py``.)

One of the security package's two I/O modules (it reads files; ``tests/test_layering.py``):
imports the standard library, ``_errors`` and the settings only; used by ``_io``.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator

from .._errors import ConfigurationError
from ._settings import SecurityConfig

__all__ = ["build_ssl_context"]


# ----------------------------------------------------------------------------- TLS


@contextlib.contextmanager
def _pem_file(text: str, what: str) -> Iterator[str]:
    """A path holding ``text`` for ``load_cert_chain`` (which reads files only).

    On Linux an anonymous in-memory file (memfd), so a key never touches the disk;
    elsewhere a private temporary file removed at once.
    """
    data = text.encode()
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(f"coopconsumer-{what}", 0)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    handle, path = tempfile.mkstemp(prefix="coopconsumer-", suffix=".pem")
    try:
        os.write(handle, data)
        os.close(handle)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def build_ssl_context(security: SecurityConfig) -> ssl.SSLContext:
    """The client TLS context for ``security`` (which must use TLS).

    Verifies the broker's chain against ``ssl.ca.*`` (or the system's CAs) and, with
    ``ssl.endpoint.identification.algorithm=https`` (the default), its hostname;
    ``enable.ssl.certificate.verification=false`` turns both off. Loads the client
    certificate and key (decrypting the key with ``ssl.key.password``). TLS 1.2 is
    the minimum, as in librdkafka. Raises ``ConfigurationError`` naming the key whose
    file or PEM cannot be used.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if security.enable_ssl_certificate_verification:
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = security.verify_hostname
        _load_cas(context, security)
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if security.ssl_cipher_suites:
        try:
            context.set_ciphers(security.ssl_cipher_suites)
        except ssl.SSLError as exc:
            raise ConfigurationError(
                f"'ssl.cipher.suites' {security.ssl_cipher_suites!r} selects no cipher: {exc}"
            ) from None
    _load_client_certificate(context, security)
    return context


def _load_cas(context: ssl.SSLContext, security: SecurityConfig) -> None:
    if security.ssl_ca_pem is not None:
        try:
            context.load_verify_locations(cadata=security.ssl_ca_pem)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigurationError(
                f"'ssl.ca.pem' holds no usable CA certificate: {exc}"
            ) from None
        return
    location = security.ssl_ca_location
    if location is None or location == "probe":
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return
    try:
        if os.path.isdir(location):
            context.load_verify_locations(capath=location)
        else:
            context.load_verify_locations(cafile=location)
    except FileNotFoundError:
        raise ConfigurationError(f"'ssl.ca.location' {location!r}: no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"'ssl.ca.location' {location!r} holds no usable CA certificate: {exc}"
        ) from None


def _load_client_certificate(context: ssl.SSLContext, security: SecurityConfig) -> None:
    if security.ssl_certificate_location is None and security.ssl_certificate_pem is None:
        return
    password = security.ssl_key_password.reveal() if security.ssl_key_password else None
    with contextlib.ExitStack() as stack:
        if security.ssl_certificate_pem is not None:
            cert_key = "ssl.certificate.pem"
            cert_path = stack.enter_context(_pem_file(security.ssl_certificate_pem, "cert"))
        else:
            cert_key = "ssl.certificate.location"
            cert_path = str(security.ssl_certificate_location)
            if not os.path.isfile(cert_path):
                raise ConfigurationError(f"{cert_key!r} {cert_path!r}: no such file")
        if security.ssl_key_pem is not None:
            key_key = "ssl.key.pem"
            key_path = stack.enter_context(_pem_file(security.ssl_key_pem.reveal(), "key"))
        else:
            key_key = "ssl.key.location"
            key_path = str(security.ssl_key_location)
            if not os.path.isfile(key_path):
                raise ConfigurationError(f"{key_key!r} {key_path!r}: no such file")
        try:
            context.load_cert_chain(cert_path, key_path, password=password or "")
        except ssl.SSLError as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            try:
                with open(key_path, "rb") as handle:
                    encrypted = b"ENCRYPTED" in handle.read(1 << 20)
            except OSError:
                encrypted = password is not None
            if encrypted and password is None:
                hint = "the key is encrypted: set 'ssl.key.password'"
            elif encrypted:
                hint = "'ssl.key.password' does not decrypt the key"
            else:
                hint = "the certificate and key do not load or do not match"
            raise ConfigurationError(
                f"cannot use the client certificate ({cert_key!r}) and key ({key_key!r}): "
                f"{hint} ({reason})"
            ) from None
