"""The production profile: ``DJANGO_SETTINGS_MODULE=portal.settings_production``.

The same settings as ``portal.settings``, with production defaults: DEBUG off, HTTPS only (SSL
redirect, HSTS, secure cookies), the Content-Security-Policy enforced, no demo, database
connections pooled in each process. Every default can still be set from the environment (see the
README's configuration table), except that DEBUG must stay off and SECRET_KEY, DATABASE_URL and
REDIS_URL must be given: there is no SQLite file and no embedded Redis here.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

PRODUCTION_DEFAULTS = {
    "DEBUG": "0",
    "FLEETLINE_DEMO": "0",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": str(365 * 24 * 3600),
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
    # The Content-Security-Policy is enforced, not only reported (portal.settings).
    "CSP_REPORT_ONLY": "0",
    # Database connections reused through a pool in each process, at most this many per process
    # (mind PostgreSQL's max_connections across every web, worker and beat process).
    "DATABASE_POOL_MAX_SIZE": "8",
}
REQUIRED = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL")

_missing = [name for name in REQUIRED if not os.environ.get(name)]
if _missing:
    raise ImproperlyConfigured(f"Production settings need {', '.join(_missing)} in the environment.")
for _name, _value in PRODUCTION_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

from portal.settings import *  # noqa: E402, F403
from portal.settings import DEBUG, SECURE_HSTS_PRELOAD  # noqa: E402

if DEBUG:
    raise ImproperlyConfigured("DEBUG must be off in production: a 500 would show settings and paths to the caller.")

# Asking browsers to preload HSTS is the operator's decision (SECURE_HSTS_PRELOAD=1), taken when
# the domain is submitted to the preload list; leaving it off is not a misconfiguration.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
