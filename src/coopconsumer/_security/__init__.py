"""Security for every connection the library makes: TLS and SASL, in one package.

- ``_settings``: the frozen ``SecurityConfig``, parsed from librdkafka's keys and
  validated once (pure);
- ``_sasl``: the SASL mechanisms as sans-I/O objects (pure; the broker session runs
  them);
- ``_tls``: the ``ssl.SSLContext`` a client builds from the settings (reads files);
- ``_credentials``: a fresh mechanism per exchange, and OAUTHBEARER tokens (HTTP, a
  refresh thread).

The package's face hands on the settings' names only, so that importing it loads
neither ``ssl`` nor a thread. ``tests/test_layering.py`` keeps the pure modules pure
and every module below ``_session`` and ``_io``.
"""

from ._settings import SASL_MECHANISMS as SASL_MECHANISMS
from ._settings import SECRET_KEYS as SECRET_KEYS
from ._settings import SECURITY_KEYS as SECURITY_KEYS
from ._settings import SECURITY_PROTOCOLS as SECURITY_PROTOCOLS
from ._settings import OAuthCallback as OAuthCallback
from ._settings import Secret as Secret
from ._settings import SecurityConfig as SecurityConfig
from ._settings import SecurityKey as SecurityKey
from ._settings import is_security_key as is_security_key
from ._settings import parse_security as parse_security
