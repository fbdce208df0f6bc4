"""Fleetline settings, read from the environment. Importing them starts nothing.

Environment (the README's configuration table lists every variable):
    DEBUG                off by default; ``make run`` sets DEBUG=1
    SECRET_KEY           required when DEBUG is off
    FLEETLINE_DEMO       the demo: demo data and logins, demo arrivals, failure injection; off by
                         default, ``make run`` sets FLEETLINE_DEMO=1
    ALLOWED_HOSTS        comma-separated, default "127.0.0.1,localhost"
    DATABASE_URL         default: SQLite file var/fleetline.sqlite3
    REDIS_URL            default: the embedded Redis server's socket, var/redis/redis.sock, which
                         ``manage.py up`` and the test session start (``portal.embedded_redis``)
    FLEET_CLOCK_SPEED    simulated seconds per real second, default 60

``portal.settings_production`` is the production profile on top of these.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
import plotly
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from core.redis_urls import celery_url
from portal.oidc_config import oidc_config_from_env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FLEETLINE_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = "fleetline-development-only-not-secret"


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")

# HTTPS. Off by default for local use over plain HTTP; the production profile turns them on.
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS") or 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", False)
# Behind a proxy that terminates TLS: the header it sets and the value meaning HTTPS, for
# example "HTTP_X_FORWARDED_PROTO,https". Set it only when the proxy always sets or strips it.
_proxy_ssl_header = _env_list("SECURE_PROXY_SSL_HEADER", "")
if _proxy_ssl_header and len(_proxy_ssl_header) != 2:
    raise ImproperlyConfigured('SECURE_PROXY_SSL_HEADER takes a header and a value: "HTTP_X_FORWARDED_PROTO,https".')
SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header[0], _proxy_ssl_header[1]) if _proxy_ssl_header else None

# The demo (``make run``): demo data and logins on an empty database, demo job arrivals and
# injected node failures. Each part can still be set on its own below.
FLEETLINE_DEMO = _env_bool("FLEETLINE_DEMO", False)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_prometheus",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "drf_standardized_errors",
    "knox",
    "channels",
    "axes",
    "csp",
    "fleet",
    "tenants",
    "scheduling",
    "portal",
    "finance",
    "observability",
    "simulations",
    "api",
]

MIDDLEWARE = [
    # Outermost and innermost: request counts and latencies for /metrics (django-prometheus).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "portal.middleware.query_string_limit",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes asks: turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "tenants.context_processors.tenants_nav",
            ],
        },
    },
]

# Reusing database connections. Under ASGI every request runs in a thread of its own, so a
# connection kept open by its thread (CONN_MAX_AGE) is never reused by the next request: the web
# server reuses connections through a pool per process instead (PostgreSQL with psycopg_pool,
# DATABASE_POOL_MAX_SIZE > 0; the production profile turns it on). CONN_MAX_AGE still serves
# processes that keep one thread (management commands). Health checks make a reused connection
# that the server dropped (a restart) reconnect instead of failing the request. A pool waits up to
# DATABASE_POOL_TIMEOUT_S for a free connection, then the request fails (the API answers 503).
DATABASE_CONN_MAX_AGE_S = int(os.environ.get("DATABASE_CONN_MAX_AGE") or 0)
DATABASE_POOL_MAX_SIZE = int(os.environ.get("DATABASE_POOL_MAX_SIZE") or 0)
DATABASE_POOL_TIMEOUT_S = float(os.environ.get("DATABASE_POOL_TIMEOUT_S") or 10)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'fleetline.sqlite3'}",
        conn_max_age=DATABASE_CONN_MAX_AGE_S,
        conn_health_checks=True,
    )
}
# Parameters bound by the server, so that psycopg prepares a statement a connection runs often (its
# fifth time): PostgreSQL then plans the lists' five-table join once per connection, not at every
# request (planning took 8 ms of a list query's 10). Off for a transaction-pooling PgBouncer.
DATABASE_PREPARED_STATEMENTS = os.environ.get("DATABASE_PREPARED_STATEMENTS", "1") == "1"
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_PREPARED_STATEMENTS:
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL_MAX_SIZE > 0:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django refuses a pool with persistent connections
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": DATABASE_POOL_TIMEOUT_S,
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default opens a file per connection: cheap, so nothing is kept open.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # A file, not memory, so that test-spawned workers and servers see the test database;
    # WAL and a busy timeout let the web server, worker and beat write side by side.
    # One file per test run, so that runs side by side do not share (and flush) one database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

# The same backends, counting queries, their durations and errors for /metrics (django-prometheus's
# counting, with its cursor class made once per process: portal/db_backends).
_PROMETHEUS_BACKENDS = {
    "django.db.backends.postgresql": "portal.db_backends.postgresql",
    "django.db.backends.sqlite3": "portal.db_backends.sqlite3",
}
_engine = DATABASES["default"]["ENGINE"]
DATABASES["default"]["ENGINE"] = _PROMETHEUS_BACKENDS.get(_engine, _engine)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Notices to people go by email too, sent by a Celery worker (``tenants.tasks``): printed to the
# worker's console unless an SMTP host is configured.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT") or 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
# Where the file backend (django.core.mail.backends.filebased.EmailBackend) writes messages.
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "fleetline@localhost")
# The address people open the site at: mails link to jobs and settings under it.
FLEETLINE_SITE_URL = os.environ.get("FLEETLINE_SITE_URL", "http://localhost:8000").rstrip("/")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Content-Security-Policy (django-csp), on every page in every profile so that the browser tests
# load the pages under the policy production sends: scripts, styles, images, fonts and
# connections (the websocket included) from this site only; no inline script or style, no
# eval, no plugins, no framing. plotly.js is served from this site (STATICFILES_DIRS).
# CSP_REPORT_ONLY=1 sends it as Content-Security-Policy-Report-Only instead, to try a change.
_CSP_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
if _env_bool("CSP_REPORT_ONLY", False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _CSP_POLICY
else:
    CONTENT_SECURITY_POLICY = _CSP_POLICY

# Login lockout (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username from one
# address, that pair is refused, even with the right password, for AXES_COOLOFF_MINUTES; every
# further wrong password restarts the wait. The lockout is written to the audit log
# (``portal.login_lockout``). A right password before the limit clears the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT") or 10)
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("AXES_COOLOFF_MINUTES") or 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "portal.login_lockout.lockout_response"
# Successful logins are not logged a second time (the sessions are the record); attempts are.
AXES_DISABLE_ACCESS_LOG = True
# The client's address: REMOTE_ADDR unless a proxy in front sets a header it always overwrites
# (for example "HTTP_X_FORWARDED_FOR,REMOTE_ADDR" with AXES_IPWARE_PROXY_COUNT=1); trusting a
# header a client can set would let it pick a fresh address for every guess.
AXES_IPWARE_META_PRECEDENCE_ORDER = _env_list("AXES_IPWARE_META_PRECEDENCE_ORDER", "REMOTE_ADDR")
AXES_IPWARE_PROXY_COUNT = (
    int(os.environ["AXES_IPWARE_PROXY_COUNT"]) if os.environ.get("AXES_IPWARE_PROXY_COUNT") else None
)

# Single sign-on (OpenID Connect, mozilla-django-oidc): on once FLEETLINE_OIDC_CLIENT_ID is set;
# `portal.oidc_config` reads and checks every FLEETLINE_OIDC_* variable (a group map that does not
# parse stops the process here). Password login stays beside it. The backend passes on every login
# but the provider's answer, and the lockout counts passwords only (the provider guards its own).
FLEETLINE_OIDC = oidc_config_from_env(os.environ)
AUTHENTICATION_BACKENDS.append("portal.oidc.OidcBackend")
AXES_WHITELIST_CALLABLE = "portal.oidc.axes_exempt"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# plotly.js ships inside the plotly package; it is served from there, never from a CDN.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/plotly", Path(plotly.__file__).parent / "package_data"),
]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Redis: the Celery broker and the Channels layer. Without REDIS_URL, the embedded server's
# socket: only the URL is computed here; ``manage.py up`` and the test session run the server.
EMBEDDED_REDIS_SOCKET = Path(os.environ.get("FLEETLINE_REDIS_SOCKET", VAR_DIR / "redis" / "redis.sock")).resolve()
EMBEDDED_REDIS = not os.environ.get("REDIS_URL")
REDIS_URL = os.environ.get("REDIS_URL") or f"unix://{EMBEDDED_REDIS_SOCKET}"

CHANNEL_LAYERS = {
    "default": {
        # channels_redis on a connection pool that waits rather than fails in a burst.
        "BACKEND": "portal.channel_layer.FleetChannelLayer",
        "CONFIG": {
            "hosts": [REDIS_URL],
            "prefix": os.environ.get("FLEETLINE_CHANNEL_PREFIX", "fleetline"),
            # A socket that vanished without leaving its groups drops out of them after this;
            # open sockets renew their membership several times per period.
            "group_expiry": 900,
        },
    }
}

CELERY_BROKER_URL = celery_url(REDIS_URL)
CELERY_RESULT_BACKEND = celery_url(REDIS_URL)
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "scheduling.tasks.fleet_heartbeat": {"queue": "cycle"},
    "scheduling.tasks.fleet_cycle": {"queue": "cycle"},
    "scheduling.tasks.demo_load": {"queue": "default"},
    "finance.tasks.report_export_build": {"queue": "reports"},
    "finance.tasks.month_report_mail": {"queue": "reports"},
    "finance.tasks.budgets_check": {"queue": "reports"},
    "simulations.tasks.simulation_run_task": {"queue": "simulations"},
}
CELERY_WORKER_QUEUES = "default,cycle,reports,simulations"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_EXPIRES = 3600
# Who carries out the cycle's decisions (``scheduling.backends``): ``modelled`` (the embedded
# default: nodes, failures, progress and ends are computed) or ``slurm`` (a real Slurm cluster
# through slurmrestd; the fleet clock is then wall time).
FLEETLINE_BACKEND = os.environ.get("FLEETLINE_BACKEND", "modelled")
if FLEETLINE_BACKEND not in ("modelled", "slurm"):
    raise ImproperlyConfigured(f"FLEETLINE_BACKEND must be 'modelled' or 'slurm', not {FLEETLINE_BACKEND!r}")
FLEETLINE_SLURM_URL = os.environ.get("FLEETLINE_SLURM_URL", "http://127.0.0.1:6820")
# The HS256 key slurmctld and slurmrestd check tokens with (``AuthAltParameters=jwt_key=``):
# Fleetline signs a short-lived token per cluster account with it, so each job is submitted as,
# and runs as, its submitter's own account.
FLEETLINE_SLURM_JWT_KEY = os.environ.get("FLEETLINE_SLURM_JWT_KEY", "")
FLEETLINE_SLURM_ADMIN_USER = os.environ.get("FLEETLINE_SLURM_ADMIN_USER", "root")
# How long one call to slurmrestd may take (a tick that cannot reach Slurm fails and is retried).
FLEETLINE_SLURM_TIMEOUT_S = float(os.environ.get("FLEETLINE_SLURM_TIMEOUT_S", "15"))
# The slurm.conf of the cluster, for ``scontrol show topology`` (racks and pods).
FLEETLINE_SLURM_CONF = os.environ.get("FLEETLINE_SLURM_CONF") or os.environ.get("SLURM_CONF", "")
FLEETLINE_SLURM_PARTITION = os.environ.get("FLEETLINE_SLURM_PARTITION", "")
# Every run's Slurm job name starts with it: one Fleetline's runs, told from anything else the
# cluster runs (and from another Fleetline's).
FLEETLINE_SLURM_RUN_PREFIX = os.environ.get("FLEETLINE_SLURM_RUN_PREFIX", "fleetline-")
# A folder every node sees at the same path (shared storage): each job's checkpoint and progress
# folders live under it.
FLEETLINE_SLURM_SHARED_DIR = os.environ.get("FLEETLINE_SLURM_SHARED_DIR", "")
# The accelerator type of nodes whose gres names none (``gpu:8`` rather than ``gpu:h100:8``).
FLEETLINE_SLURM_ACCELERATOR = os.environ.get("FLEETLINE_SLURM_ACCELERATOR", "H100")
# Cluster accounts from the environment, ``user=account,...``, beside those an admin sets.
FLEETLINE_CLUSTER_ACCOUNTS = {
    user.strip(): account.strip()
    for user, _, account in (
        pair.partition("=") for pair in os.environ.get("FLEETLINE_CLUSTER_ACCOUNTS", "").split(",") if pair.strip()
    )
}
FLEET_CLOCK_SPEED = float(os.environ.get("FLEET_CLOCK_SPEED", "1" if FLEETLINE_BACKEND != "modelled" else "60"))
if FLEETLINE_BACKEND != "modelled" and FLEET_CLOCK_SPEED != 1.0:
    raise ImproperlyConfigured("With a real backend the fleet clock is wall time: FLEET_CLOCK_SPEED must be 1")
FLEET_CYCLE_INTERVAL_S = float(os.environ.get("FLEET_CYCLE_INTERVAL_S", "1.0"))
# The cycle lock's expiry: the leader renews it while its tick runs, so only a leader that dies
# mid-tick lets it lapse, and the next leader ticks at most this long after.
FLEET_CYCLE_LOCK_TIMEOUT_S = float(os.environ.get("FLEET_CYCLE_LOCK_TIMEOUT_S", "3"))
# A leader frozen mid-tick (stopped, swapped out, partitioned) holds the fleet clock's row lock;
# PostgreSQL ends its session once it has sat this long idle inside the tick's transaction.
FLEET_CYCLE_IDLE_TIMEOUT_S = float(os.environ.get("FLEET_CYCLE_IDLE_TIMEOUT_S", "10"))
# The leader keeps the fleet state between its ticks (``scheduling.cycle.kept``) and rebuilds it
# from scratch at least this often, whatever its checks find.
FLEET_CYCLE_REBUILD_EVERY = int(os.environ.get("FLEET_CYCLE_REBUILD_EVERY", "100"))
# The kept state is frozen out of the cyclic collector's sight between ticks once it holds at least
# this many nodes and jobs (fewer cost a collection little; freezing costs one full collection of
# the whole process each time the state is rebuilt).
FLEET_CYCLE_FREEZE_FROM = int(os.environ.get("FLEET_CYCLE_FREEZE_FROM", "1000"))
# Demo arrivals keep the demo fleet busy; part of the demo only.
FLEET_DEMO_WORKLOAD = _env_bool("FLEET_DEMO_WORKLOAD", FLEETLINE_DEMO and FLEETLINE_BACKEND == "modelled")
# Seeded node failures (crash, GPU loss, slowdown) injected into the live fleet each tick: part of
# the demo only (a test may turn them on).
FLEET_FAILURES = _env_bool("FLEET_FAILURES", FLEETLINE_DEMO and FLEETLINE_BACKEND == "modelled")

# The sockets' heartbeat is made by each web process for its own sockets, this often (seconds; 0:
# none) on the whole seconds of the clock (``FleetChannelLayer.beat_set``), not by Celery beat: a
# task on the cycle queue waited behind ticks, and sockets went over a second without one.
FLEET_SOCKET_HEARTBEAT_S = float(os.environ.get("FLEET_SOCKET_HEARTBEAT_S", "1.0"))
if not FLEET_SOCKET_HEARTBEAT_S >= 0.0:
    raise ImproperlyConfigured(f"FLEET_SOCKET_HEARTBEAT_S must be 0 or more seconds, not {FLEET_SOCKET_HEARTBEAT_S!r}")
CELERY_BEAT_SCHEDULE = {
    "fleet-cycle": {
        "task": "scheduling.tasks.fleet_cycle",
        "schedule": FLEET_CYCLE_INTERVAL_S,
        "options": {"expires": 5 * FLEET_CYCLE_INTERVAL_S},
    },
}
# Finance (README "Finance"): budgets are checked against spend this often (wall seconds).
CELERY_BEAT_SCHEDULE["finance-budgets"] = {
    "task": "finance.tasks.budgets_check",
    "schedule": float(os.environ.get("FINANCE_BUDGET_CHECK_INTERVAL_S") or 60),
    "options": {"expires": 60},
}
# The currency rates and budgets are kept in (ISO 4217), and the fleet calendar's epoch: the
# instant of fleet second 0, ISO 8601; empty: the wall time of the first recorded tick.
FINANCE_CURRENCY = os.environ.get("FINANCE_CURRENCY", "EUR")
FLEET_EPOCH = os.environ.get("FLEET_EPOCH", "")
# Report periods longer than this many days are built by a worker on the reports queue.
FINANCE_SYNC_EXPORT_MAX_DAYS = int(os.environ.get("FINANCE_SYNC_EXPORT_MAX_DAYS") or 92)

if FLEET_DEMO_WORKLOAD:
    CELERY_BEAT_SCHEDULE["demo-load"] = {
        "task": "scheduling.tasks.demo_load",
        "schedule": 2.0,
        "options": {"expires": 10},
    }

# Observability (README "Operations"). /metrics answers clients on these networks (CIDR, comma-
# separated) and clients sending "Authorization: Bearer <FLEETLINE_METRICS_TOKEN>"; nobody else.
# /readyz fails when the scheduling cycle has not ticked for FLEETLINE_READY_TICK_MAX_AGE_S.
FLEETLINE_METRICS_TOKEN = os.environ.get("FLEETLINE_METRICS_TOKEN", "")
FLEETLINE_METRICS_ALLOWED_NETWORKS = _env_list("FLEETLINE_METRICS_ALLOWED_NETWORKS", "127.0.0.1/32,::1/128")
FLEETLINE_READY_TICK_MAX_AGE_S = float(os.environ.get("FLEETLINE_READY_TICK_MAX_AGE_S") or 30)
# Probes and scrapers speak plain HTTP inside the deployment.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

# What-if replays (the simulations queue): bounds on what one replay may take.
SIMULATION_MAX_TRACE_BYTES = int(os.environ.get("SIMULATION_MAX_TRACE_BYTES") or 5 * 1024 * 1024)
SIMULATION_MAX_JOBS = int(os.environ.get("SIMULATION_MAX_JOBS") or 20_000)
SIMULATION_MAX_WALL_S = float(os.environ.get("SIMULATION_MAX_WALL_S") or 600)
SIMULATION_MAX_HISTORY_DAYS = float(os.environ.get("SIMULATION_MAX_HISTORY_DAYS") or 90)
SIMULATION_MAX_NODES = int(os.environ.get("SIMULATION_MAX_NODES") or 4096)

REST_FRAMEWORK = {
    # Bearer first: DRF answers an unauthenticated call with the first class's challenge, so
    # anonymous clients get 401 with "WWW-Authenticate: Bearer" rather than a bare 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The v1 API's schema: drf-spectacular, with the v1 error format documented per endpoint.
    "DEFAULT_SCHEMA_CLASS": "drf_standardized_errors.openapi.AutoSchema",
}

# API v1 (``api/``): personal tokens made on the tokens page, stored as digests (django-rest-knox),
# sent as "Authorization: Bearer fl_..."; they do not expire until revoked.
KNOX_TOKEN_MODEL = "api.ApiToken"
# knox's own migrations create its default token table even when the model is swapped for ours;
# without them nothing is created for it (a stray table would also block test database flushes).
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {"AUTH_HEADER_PREFIX": "Bearer", "TOKEN_TTL": None, "TOKEN_PREFIX": "fl_"}
# Per-user request rates of the v1 API ("N/s", "N/min", "N/hour"), counted in the shared Redis so
# that every web process enforces one budget; submissions count against a budget of their own.
API_THROTTLE_RATE = os.environ.get("API_THROTTLE_RATE", "6000/min")
API_SUBMIT_THROTTLE_RATE = os.environ.get("API_SUBMIT_THROTTLE_RATE", "3000/min")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        # One pool per process, not one per request (Django makes a backend per request context).
        "OPTIONS": {"pool_class": "core.redis_pools.SharedConnectionPool"},
        "KEY_PREFIX": os.environ.get("FLEETLINE_CHANNEL_PREFIX", "fleetline") + ":throttle",
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Fleetline API",
    "DESCRIPTION": "Jobs, teams, quotas, policy, the fleet and its incidents, usage reports. "
    "Authenticate with `Authorization: Bearer <token>` (tokens are made on the API tokens page) or a "
    "browser session. Errors share one format: `{type, errors: [{code, detail, attr}]}`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "PREPROCESSING_HOOKS": ["api.schema.only_v1_endpoints"],
    "POSTPROCESSING_HOOKS": [
        "drf_standardized_errors.openapi_hooks.postprocess_schema_enums",
        "api.schema.add_websocket_events",
        "api.schema.add_links",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "api.enums.JOB_STATES",
        "NodeStateEnum": "api.enums.NODE_STATES",
        "IncidentKindEnum": "api.enums.INCIDENT_KINDS",
        "KindEnum": "scheduling.models.JobKind",
        "SchedulerEventKindEnum": "api.enums.SCHEDULER_EVENT_KINDS",
        "QuotaRequestStateEnum": "api.enums.QUOTA_REQUEST_STATES",
        "LevelEnum": "api.views.jobs.LEVEL_CHOICES",
        "SimulationStateEnum": "simulations.models.Simulation.State",
        "SimulationSourceEnum": "simulations.models.Simulation.Source",
        "ValidationErrorEnum": "drf_standardized_errors.openapi_serializers.ValidationErrorEnum.choices",
        "ClientErrorEnum": "drf_standardized_errors.openapi_serializers.ClientErrorEnum.choices",
        "ServerErrorEnum": "drf_standardized_errors.openapi_serializers.ServerErrorEnum.choices",
        "ErrorCode401Enum": "drf_standardized_errors.openapi_serializers.ErrorCode401Enum.choices",
        "ErrorCode403Enum": "drf_standardized_errors.openapi_serializers.ErrorCode403Enum.choices",
        "ErrorCode404Enum": "drf_standardized_errors.openapi_serializers.ErrorCode404Enum.choices",
        "ErrorCode405Enum": "drf_standardized_errors.openapi_serializers.ErrorCode405Enum.choices",
        "ErrorCode406Enum": "drf_standardized_errors.openapi_serializers.ErrorCode406Enum.choices",
        "ErrorCode415Enum": "drf_standardized_errors.openapi_serializers.ErrorCode415Enum.choices",
        "ErrorCode429Enum": "drf_standardized_errors.openapi_serializers.ErrorCode429Enum.choices",
        "ErrorCode500Enum": "drf_standardized_errors.openapi_serializers.ErrorCode500Enum.choices",
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
DRF_STANDARDIZED_ERRORS = {
    "EXCEPTION_HANDLER_CLASS": "api.errors.ApiExceptionHandler",
    "ALLOWED_ERROR_STATUS_CODES": ["400", "401", "403", "404", "405", "406", "415", "429", "500", "503"],
    "ERROR_SCHEMAS": {"400": "api.errors.ErrorResponse400Serializer", "503": "api.errors.ErrorResponse503Serializer"},
}

# One line per record, the same in every process (web, worker, beat, ``manage.py up``):
#   2025-06-01T12:00:00+0000 WARNING portal.supervisor[4242] worker exited with code -9 ...
# Celery keeps its hands off the root logger so that workers and beat log this way too.
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "line": {
            "format": "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s",
            "datefmt": "%Y-%m-%dT%H:%M:%S%z",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "line"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # A line per task received and finished is noise at one cycle a second; the cycle logs
        # its own line per tick.
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
        # A line per request to slurmrestd, several a tick on a real backend.
        "httpx": {"level": "WARNING"},
    },
}
