"""Security settings: TLS and SASL for every connection the library makes.

One frozen ``SecurityConfig`` value, parsed from librdkafka's keys (so a confluent-kafka
configuration pastes unchanged) and validated once: contradictory or incomplete
combinations are a ``ConfigurationError`` naming the key. The same value drives the wire
client's connections (``_io``) and, through :meth:`SecurityConfig.librdkafka_config`, the
confluent-kafka fetcher and producer, so nothing is configured twice.

Secrets (``sasl.password``, ``ssl.key.password``, ``ssl.key.pem``,
``sasl.oauthbearer.client.secret``) are held as :class:`Secret`, whose ``repr``/``str``
never show the value; error messages never quote them.

Pure: imports attrs, the standard library and ``_errors``; no I/O (files named by
``ssl.*.location`` are read when a client builds its TLS context, in ``_tls``).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

import attrs

from .._errors import ConfigurationError

__all__ = [
    "SASL_MECHANISMS",
    "SECRET_KEYS",
    "SECURITY_KEYS",
    "SECURITY_PROTOCOLS",
    "OAuthCallback",
    "Secret",
    "SecurityConfig",
    "SecurityKey",
    "parse_security",
]

#: ``security.protocol`` values, librdkafka's spelling (any case is accepted).
SECURITY_PROTOCOLS: Final = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
#: SASL mechanisms the library speaks.
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: confluent-kafka's ``oauth_cb``: called with ``sasl.oauthbearer.config``, returns
#: ``(token, expiry)`` with ``expiry`` in seconds since the epoch, optionally followed by
#: a principal name and a dict of SASL extensions.
OAuthCallback: TypeAlias = Callable[[str | None], Any]


class Secret:
    """A credential that never shows itself: ``repr`` and ``str`` print ``***``.

    ``reveal()`` returns the value for the one place that needs it (a SASL message, a
    TLS key load, librdkafka's configuration). Equality compares in constant time.
    Pickling keeps the value (a configuration must rebuild on a Spark executor); errors
    never hold a ``Secret``.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("a Secret holds a string")
        self._value = value

    def reveal(self) -> str:
        """The secret itself."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Secret, (self._value,))


def _secret(value: Secret | str | None) -> Secret | None:
    if value is None or isinstance(value, Secret):
        return value
    return Secret(value)


def _extensions(value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, tuple):
        return tuple((str(k), str(v)) for k, v in value)
    if isinstance(value, Mapping):
        return tuple((str(k), str(v)) for k, v in value.items())
    raise ConfigurationError(
        f"sasl.oauthbearer.extensions must be 'key=value,...' or a mapping, not {value!r}"
    )


#: RFC 7628 section 3.1: ``key = 1*(ALPHA)``, ``value = *(VCHAR / SP / HTAB / CR / LF)``.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]*")


@attrs.frozen(kw_only=True)
class SecurityConfig:
    """How to secure and authenticate broker connections (librdkafka's semantics).

    ``SecurityConfig()`` is PLAINTEXT. Build it from Kafka keys with
    :func:`parse_security`; direct construction is validated the same way. Field names
    are the keys in snake_case.
    """

    #: ``plaintext``, ``ssl``, ``sasl_plaintext`` or ``sasl_ssl``.
    security_protocol: str = "plaintext"
    #: CA certificates: a PEM file, a directory of hashed certificates, or ``probe``
    #: (the system's default locations). None: the system's default CAs.
    ssl_ca_location: str | None = None
    #: CA certificates as PEM text.
    ssl_ca_pem: str | None = None
    #: Client certificate (chain) for mutual TLS, a PEM file.
    ssl_certificate_location: str | None = None
    #: Client certificate (chain) as PEM text.
    ssl_certificate_pem: str | None = None
    #: Client private key, a PEM file (may be encrypted: see ``ssl_key_password``).
    ssl_key_location: str | None = None
    #: Client private key as PEM text.
    ssl_key_pem: Secret | None = attrs.field(default=None, converter=_secret)
    #: Password of an encrypted private key.
    ssl_key_password: Secret | None = attrs.field(default=None, converter=_secret)
    #: ``https`` checks that the broker's certificate names the host connected to;
    #: ``none`` does not (librdkafka >= 2.0's default is ``https``).
    ssl_endpoint_identification_algorithm: str = "https"
    #: False disables every check of the broker's certificate (chain and hostname).
    enable_ssl_certificate_verification: bool = True
    #: OpenSSL cipher list (TLS 1.2 and below), None for OpenSSL's default.
    ssl_cipher_suites: str | None = None
    #: The SASL mechanism; None means librdkafka's default, GSSAPI (not supported).
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = attrs.field(default=None, converter=_secret)
    #: OAUTHBEARER token callback, confluent-kafka's ``oauth_cb``.
    oauth_cb: OAuthCallback | None = attrs.field(default=None, eq=False)
    #: The string handed to ``oauth_cb`` (librdkafka's ``sasl.oauthbearer.config``).
    sasl_oauthbearer_config: str | None = None
    #: ``default`` (tokens from ``oauth_cb``) or ``oidc`` (client credentials grant).
    sasl_oauthbearer_method: str = "default"
    sasl_oauthbearer_client_id: str | None = None
    sasl_oauthbearer_client_secret: Secret | None = attrs.field(default=None, converter=_secret)
    sasl_oauthbearer_token_endpoint_url: str | None = None
    sasl_oauthbearer_scope: str | None = None
    #: SASL extensions sent with every OAUTHBEARER token (RFC 7628), ``(key, value)``.
    sasl_oauthbearer_extensions: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_extensions
    )

    def __attrs_post_init__(self) -> None:
        _validate(self)

    @property
    def uses_tls(self) -> bool:
        """Whether connections are wrapped in TLS (``ssl`` or ``sasl_ssl``)."""
        return self.security_protocol in ("ssl", "sasl_ssl")

    @property
    def uses_sasl(self) -> bool:
        """Whether connections authenticate with SASL after ApiVersions."""
        return self.security_protocol in ("sasl_plaintext", "sasl_ssl")

    @property
    def verify_hostname(self) -> bool:
        """Whether the broker certificate's names are checked against the host."""
        return (
            self.enable_ssl_certificate_verification
            and self.ssl_endpoint_identification_algorithm == "https"
        )

    def librdkafka_config(self) -> dict[str, Any]:
        """These settings as confluent-kafka configuration keys (secrets revealed).

        Only keys that differ from librdkafka's defaults are listed, plus
        ``security.protocol`` always; ``oauth_cb`` is handed over as the callable.
        """
        out: dict[str, Any] = {"security.protocol": self.security_protocol}
        for key in SECURITY_KEYS:
            if key == "security.protocol":
                continue
            value = getattr(self, SECURITY_KEYS[key].attr)
            default = SECURITY_KEYS[key].default
            if value is None or value == default:
                continue
            if isinstance(value, Secret):
                value = value.reveal()
            elif key == "sasl.oauthbearer.extensions":
                value = ",".join(f"{k}={v}" for k, v in value)
            out[key] = value
        return out

    def redacted(self) -> dict[str, object]:
        """The settings as Kafka keys for display, secrets shown as ``***``."""
        shown: dict[str, object] = {}
        for key, spec in SECURITY_KEYS.items():
            value = getattr(self, spec.attr)
            if value is None or (value == spec.default and key != "security.protocol"):
                continue
            shown[key] = "***" if key in SECRET_KEYS else value
        return shown


# ----------------------------------------------------------------------------- keys


@attrs.frozen
class SecurityKey:
    """One security key: its attribute, parser, default and description."""

    key: str
    attr: str
    parse: Callable[[str, object], Any]
    default: Any
    description: str


def _shown(key: str, value: object) -> str:
    if key in SECRET_KEYS:
        return "(a secret, not shown)"
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:60]}...({len(text)} characters)"


def _fail(key: str, value: object, allowed: str) -> ConfigurationError:
    return ConfigurationError(f"invalid value {_shown(key, value)} for {key!r}: expected {allowed}")


def _text(key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(key, value, "a non-empty string")
    return value.strip() if key not in SECRET_KEYS else value


def _pem(key: str, value: object) -> str:
    if not isinstance(value, str) or "-----BEGIN " not in value:
        raise _fail(key, value, "PEM text ('-----BEGIN ...')")
    return value


def _choice(*choices: str) -> Callable[[str, object], str]:
    def parse(key: str, value: object) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise _fail(key, value, " | ".join(choices))

    return parse


def _mechanism(key: str, value: object) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip().upper()
    raise _fail(key, value, " | ".join(SASL_MECHANISMS))


def _flag(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        return value.strip().lower() in ("true", "1")
    raise _fail(key, value, "true or false")


def _callback(key: str, value: object) -> OAuthCallback:
    if not callable(value):
        raise _fail(key, value, "a callable: oauth_cb(config) -> (token, expiry_seconds)")
    return value


def _url(key: str, value: object) -> str:
    if isinstance(value, str) and re.match(r"https?://[^\s/]+", value.strip()):
        return value.strip()
    raise _fail(key, value, "an http:// or https:// URL")


def _parse_extensions(key: str, value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, Mapping):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, str):
        pairs = []
        for item in value.split(","):
            if not item.strip():
                continue
            name, sep, val = item.partition("=")
            if not sep:
                raise _fail(key, value, "'key=value,key2=value2'")
            pairs.append((name.strip(), val))
    else:
        raise _fail(key, value, "'key=value,key2=value2' or a mapping")
    return tuple(pairs)


_S = SecurityKey

#: Every security key, librdkafka's name -> how it is parsed (in documentation order).
SECURITY_KEYS: Final[Mapping[str, SecurityKey]] = {
    k.key: k
    for k in (
        _S(
            "security.protocol",
            "security_protocol",
            _choice(*SECURITY_PROTOCOLS),
            "plaintext",
            "How connections are secured: plaintext, ssl (TLS), sasl_plaintext (SASL "
            "without TLS) or sasl_ssl (SASL over TLS). Applies to every connection: the "
            "group member's, the fetcher's and the writers' producers.",
        ),
        _S(
            "ssl.ca.location",
            "ssl_ca_location",
            _text,
            None,
            "CA certificate(s) to verify brokers with: a PEM file or a directory; 'probe' "
            "or unset uses the system's CAs.",
        ),
        _S("ssl.ca.pem", "ssl_ca_pem", _pem, None, "CA certificate(s) as PEM text."),
        _S(
            "ssl.certificate.location",
            "ssl_certificate_location",
            _text,
            None,
            "Client certificate (PEM file) for mutual TLS; needs a key.",
        ),
        _S(
            "ssl.certificate.pem",
            "ssl_certificate_pem",
            _pem,
            None,
            "Client certificate as PEM text; needs a key.",
        ),
        _S(
            "ssl.key.location",
            "ssl_key_location",
            _text,
            None,
            "Client private key (PEM file), possibly encrypted; needs a certificate.",
        ),
        _S(
            "ssl.key.pem",
            "ssl_key_pem",
            _pem,
            None,
            "Client private key as PEM text (a secret: never logged).",
        ),
        _S(
            "ssl.key.password",
            "ssl_key_password",
            _text,
            None,
            "Password of an encrypted client key (a secret: never logged).",
        ),
        _S(
            "ssl.endpoint.identification.algorithm",
            "ssl_endpoint_identification_algorithm",
            _choice("https", "none"),
            "https",
            "https: the broker certificate must name the host connected to; none: no "
            "hostname check.",
        ),
        _S(
            "enable.ssl.certificate.verification",
            "enable_ssl_certificate_verification",
            _flag,
            True,
            "false accepts any broker certificate (no chain or hostname check): for tests only.",
        ),
        _S(
            "ssl.cipher.suites",
            "ssl_cipher_suites",
            _text,
            None,
            "OpenSSL cipher list for TLS 1.2 and below.",
        ),
        _S(
            "sasl.mechanism",
            "sasl_mechanism",
            _mechanism,
            None,
            "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER "
            "(librdkafka's default GSSAPI is not supported). Also 'sasl.mechanisms'.",
        ),
        _S(
            "sasl.username",
            "sasl_username",
            _text,
            None,
            "User name for PLAIN and SCRAM.",
        ),
        _S(
            "sasl.password",
            "sasl_password",
            _text,
            None,
            "Password for PLAIN and SCRAM (a secret: never logged).",
        ),
        _S(
            "oauth_cb",
            "oauth_cb",
            _callback,
            None,
            "OAUTHBEARER token callback, as confluent-kafka's: oauth_cb(config) returns "
            "(token, expiry in seconds since the epoch[, principal, extensions]).",
        ),
        _S(
            "sasl.oauthbearer.config",
            "sasl_oauthbearer_config",
            _text,
            None,
            "String handed to oauth_cb.",
        ),
        _S(
            "sasl.oauthbearer.method",
            "sasl_oauthbearer_method",
            _choice("default", "oidc"),
            "default",
            "default: tokens come from oauth_cb; oidc: the client credentials grant "
            "against sasl.oauthbearer.token.endpoint.url.",
        ),
        _S(
            "sasl.oauthbearer.client.id",
            "sasl_oauthbearer_client_id",
            _text,
            None,
            "OIDC client id.",
        ),
        _S(
            "sasl.oauthbearer.client.secret",
            "sasl_oauthbearer_client_secret",
            _text,
            None,
            "OIDC client secret (a secret: never logged).",
        ),
        _S(
            "sasl.oauthbearer.token.endpoint.url",
            "sasl_oauthbearer_token_endpoint_url",
            _url,
            None,
            "OIDC token endpoint.",
        ),
        _S(
            "sasl.oauthbearer.scope",
            "sasl_oauthbearer_scope",
            _text,
            None,
            "OIDC scope to request (optional).",
        ),
        _S(
            "sasl.oauthbearer.extensions",
            "sasl_oauthbearer_extensions",
            _parse_extensions,
            (),
            "SASL extensions sent with the token: 'key=value,key2=value2'.",
        ),
    )
}

#: Keys whose values are never shown.
SECRET_KEYS: Final = frozenset(
    {"sasl.password", "ssl.key.password", "ssl.key.pem", "sasl.oauthbearer.client.secret"}
)

#: Other spellings: librdkafka's plural -> our key.
SECURITY_SYNONYMS: Final[Mapping[str, str]] = {"sasl.mechanisms": "sasl.mechanism"}

#: Keys of Java clients or of librdkafka features this library does not support, with
#: what to use instead.
UNSUPPORTED_SECURITY_KEYS: Final[Mapping[str, str]] = {
    "sasl.jaas.config": "use sasl.username and sasl.password (librdkafka's keys)",
    "ssl.truststore.location": "use ssl.ca.location with a PEM file",
    "ssl.truststore.password": "use ssl.ca.location with a PEM file",
    "ssl.truststore.type": "use ssl.ca.location with a PEM file",
    "ssl.keystore.location": "use ssl.certificate.location and ssl.key.location (PEM)",
    "ssl.keystore.password": "use ssl.key.password",
    "ssl.keystore.type": "use ssl.certificate.location and ssl.key.location (PEM)",
    "enable.sasl.oauthbearer.unsecure.jwt": "pass an oauth_cb that returns a token",
    "sasl.kerberos.service.name": "GSSAPI (Kerberos) is not supported",
    "sasl.kerberos.principal": "GSSAPI (Kerberos) is not supported",
    "sasl.kerberos.keytab": "GSSAPI (Kerberos) is not supported",
    "sasl.kerberos.kinit.cmd": "GSSAPI (Kerberos) is not supported",
    "ssl_key": "use ssl.key.pem",
    "ssl_ca": "use ssl.ca.pem",
    "ssl.engine.location": "OpenSSL engines are not supported",
    "ssl.providers": "OpenSSL providers are not supported",
}


def is_security_key(key: str) -> bool:
    """Whether ``key`` is a security key (ours, a synonym or a refused one)."""
    return (
        key in SECURITY_KEYS
        or key in SECURITY_SYNONYMS
        or key in UNSUPPORTED_SECURITY_KEYS
        or key.startswith(("ssl.", "sasl."))
    )


def parse_security(settings: Mapping[str, object]) -> SecurityConfig:
    """Build a ``SecurityConfig`` from librdkafka keys (only security keys allowed).

    ``None`` values mean "not set". Raises ``ConfigurationError`` naming the key for an
    unknown or unsupported key, a bad value, a key given under two names, or a
    contradictory or incomplete combination.
    """
    values: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for raw_key, value in settings.items():
        key = raw_key.strip()
        if key in UNSUPPORTED_SECURITY_KEYS:
            raise ConfigurationError(f"{key!r} is not supported: {UNSUPPORTED_SECURITY_KEYS[key]}")
        canonical = SECURITY_SYNONYMS.get(key, key)
        spec = SECURITY_KEYS.get(canonical)
        if spec is None:
            import difflib  # only for the error message; not at import time

            close = difflib.get_close_matches(key, [*SECURITY_KEYS, *SECURITY_SYNONYMS], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            known = ", ".join(sorted(SECURITY_KEYS))
            raise ConfigurationError(
                f"unknown security key {key!r}; {hint}the supported ones are: {known}"
            )
        if value is None:
            continue
        if canonical in given_as:
            raise ConfigurationError(
                f"{given_as[canonical]!r} and {raw_key!r} set the same option; give one"
            )
        given_as[canonical] = raw_key
        values[spec.attr] = spec.parse(key, value)
    try:
        return SecurityConfig(**values)
    except ConfigurationError as exc:
        # Name keys as the user wrote them (sasl.mechanisms, not sasl.mechanism).
        message = str(exc)
        for canonical, raw in given_as.items():
            if raw.strip() != canonical:
                message = message.replace(f"'{canonical}'", f"'{raw.strip()}'")
        if message == str(exc):
            raise
        raise ConfigurationError(message) from None


# ----------------------------------------------------------------------------- rules


def _validate(c: SecurityConfig) -> None:
    if c.security_protocol not in SECURITY_PROTOCOLS:
        raise _fail("security.protocol", c.security_protocol, " | ".join(SECURITY_PROTOCOLS))
    _check_tls(c)
    _check_sasl(c)


def _set_keys(c: SecurityConfig, prefix: tuple[str, ...]) -> list[str]:
    return [
        key
        for key, spec in SECURITY_KEYS.items()
        if key.startswith(prefix) and getattr(c, spec.attr) not in (None, spec.default)
    ]


def _check_tls(c: SecurityConfig) -> None:
    if not c.uses_tls:
        tls_keys = _set_keys(c, ("ssl.", "enable.ssl."))
        if tls_keys:
            raise ConfigurationError(
                f"{tls_keys[0]!r} is set but 'security.protocol' is "
                f"{c.security_protocol!r}: TLS settings need ssl or sasl_ssl"
            )
        return
    for one, other in (
        ("ssl.ca.location", "ssl.ca.pem"),
        ("ssl.certificate.location", "ssl.certificate.pem"),
        ("ssl.key.location", "ssl.key.pem"),
    ):
        if getattr(c, SECURITY_KEYS[one].attr) and getattr(c, SECURITY_KEYS[other].attr):
            raise ConfigurationError(f"{one!r} and {other!r} are both set; give one")
    has_cert = bool(c.ssl_certificate_location or c.ssl_certificate_pem)
    has_key = bool(c.ssl_key_location or c.ssl_key_pem)
    if has_cert and not has_key:
        raise ConfigurationError(
            "a client certificate is set ('ssl.certificate.location' or "
            "'ssl.certificate.pem') without its key: set 'ssl.key.location' or 'ssl.key.pem'"
        )
    if has_key and not has_cert:
        raise ConfigurationError(
            "a client key is set ('ssl.key.location' or 'ssl.key.pem') without its "
            "certificate: set 'ssl.certificate.location' or 'ssl.certificate.pem'"
        )
    if c.ssl_key_password is not None and not has_key:
        raise ConfigurationError("'ssl.key.password' is set but no client key is")
    if c.ssl_endpoint_identification_algorithm not in ("https", "none"):
        raise _fail(
            "ssl.endpoint.identification.algorithm",
            c.ssl_endpoint_identification_algorithm,
            "https | none",
        )


def _check_sasl(c: SecurityConfig) -> None:
    sasl_keys = _set_keys(c, ("sasl.", "oauth_cb"))
    if not c.uses_sasl:
        if sasl_keys:
            raise ConfigurationError(
                f"{sasl_keys[0]!r} is set but 'security.protocol' is "
                f"{c.security_protocol!r}: SASL settings need sasl_plaintext or sasl_ssl"
            )
        return
    mechanism = c.sasl_mechanism
    if mechanism is None or mechanism == "GSSAPI":
        raise ConfigurationError(
            f"'security.protocol' is {c.security_protocol!r} but 'sasl.mechanism' is "
            f"{'unset (librdkafka defaults to GSSAPI)' if mechanism is None else 'GSSAPI'}"
            f": GSSAPI (Kerberos) is not supported; set 'sasl.mechanism' to one of "
            f"{', '.join(SASL_MECHANISMS)}"
        )
    if mechanism not in SASL_MECHANISMS:
        raise _fail("sasl.mechanism", mechanism, " | ".join(SASL_MECHANISMS))
    oauth_keys = [k for k in sasl_keys if k.startswith(("sasl.oauthbearer.", "oauth_cb"))]
    if mechanism != "OAUTHBEARER":
        if oauth_keys:
            raise ConfigurationError(
                f"{oauth_keys[0]!r} is set but 'sasl.mechanism' is {mechanism!r}: "
                f"OAUTHBEARER settings need sasl.mechanism=OAUTHBEARER"
            )
        for key, value in (("sasl.username", c.sasl_username), ("sasl.password", c.sasl_password)):
            if value is None:
                raise ConfigurationError(f"{mechanism} needs {key!r}")
        return
    for key, value in (("sasl.username", c.sasl_username), ("sasl.password", c.sasl_password)):
        if value is not None:
            raise ConfigurationError(
                f"{key!r} is set but 'sasl.mechanism' is OAUTHBEARER, which does not use "
                f"it: OAUTHBEARER takes a token from 'oauth_cb' or "
                f"'sasl.oauthbearer.method'='oidc'"
            )
    oidc_keys = [
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.scope",
    ]
    if c.sasl_oauthbearer_method == "oidc":
        if c.oauth_cb is not None:
            raise ConfigurationError(
                "'oauth_cb' and 'sasl.oauthbearer.method'='oidc' are both set: the token "
                "comes from one of them; give one"
            )
        for key in oidc_keys[:3]:
            if getattr(c, SECURITY_KEYS[key].attr) is None:
                raise ConfigurationError(f"'sasl.oauthbearer.method'='oidc' needs {key!r}")
    else:
        for key in oidc_keys:
            if getattr(c, SECURITY_KEYS[key].attr) is not None:
                raise ConfigurationError(
                    f"{key!r} is set but 'sasl.oauthbearer.method' is 'default': set "
                    f"'sasl.oauthbearer.method'='oidc' to use the token endpoint"
                )
        if c.oauth_cb is None:
            raise ConfigurationError(
                "'sasl.mechanism' is OAUTHBEARER but no token source is set: pass "
                "'oauth_cb' (a callable returning (token, expiry_seconds)) or set "
                "'sasl.oauthbearer.method'='oidc' with its client id, secret and token "
                "endpoint"
            )
    for name, value in c.sasl_oauthbearer_extensions:
        if not _EXTENSION_KEY.fullmatch(name) or name == "auth":
            raise ConfigurationError(
                f"invalid SASL extension name {name!r} in 'sasl.oauthbearer.extensions': "
                f"letters only, and not 'auth' (RFC 7628)"
            )
        if not _EXTENSION_VALUE.fullmatch(value):
            raise ConfigurationError(
                f"invalid value for SASL extension {name!r} in "
                f"'sasl.oauthbearer.extensions': printable ASCII only (RFC 7628)"
            )
