"""Fleetline settings, read from the environment with safe defaults for local use.

Environment:
    DEBUG                on by default for local use; set DEBUG=0 in production
    SECRET_KEY           required when DEBUG is off
    ALLOWED_HOSTS        comma-separated, default "127.0.0.1,localhost"
    DATABASE_URL         default: SQLite file var/fleetline.sqlite3
    REDIS_URL            default: an embedded Redis server on var/redis/redis.sock
    FLEET_CLOCK_SPEED    simulated seconds per real second, default 60
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from portal import embedded_redis
from portal.redis_urls import celery_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FLEETLINE_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = "fleetline-development-only-not-secret"


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "channels",
    "tenants",
    "scheduling",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.query_string_limit",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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

VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'fleetline.sqlite3'}",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so that test-spawned workers and servers see the test database;
    # WAL and a busy timeout let the web server, worker and beat write side by side.
    # One file per test run, so that runs side by side do not share (and flush) one database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Notices to people go by email too: printed to the console unless an SMTP host is configured.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "fleetline@localhost")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

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

# Redis: the Celery broker and the Channels layer.
EMBEDDED_REDIS_SOCKET = Path(os.environ.get("FLEETLINE_REDIS_SOCKET", VAR_DIR / "redis" / "redis.sock")).resolve()
REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED_REDIS_STARTED = False
if not REDIS_URL:
    EMBEDDED_REDIS_STARTED = embedded_redis.ensure_running(EMBEDDED_REDIS_SOCKET)
    REDIS_URL = f"unix://{EMBEDDED_REDIS_SOCKET}"

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [REDIS_URL],
            "prefix": os.environ.get("FLEETLINE_CHANNEL_PREFIX", "fleetline"),
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
}
CELERY_WORKER_QUEUES = "default,cycle,reports,simulations"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_EXPIRES = 3600
FLEET_CLOCK_SPEED = float(os.environ.get("FLEET_CLOCK_SPEED", "60"))
FLEET_CYCLE_INTERVAL_S = float(os.environ.get("FLEET_CYCLE_INTERVAL_S", "1.0"))
# The cycle lock's expiry: the leader renews it while its tick runs, so only a leader that dies
# mid-tick lets it lapse, and the next leader ticks at most this long after.
FLEET_CYCLE_LOCK_TIMEOUT_S = float(os.environ.get("FLEET_CYCLE_LOCK_TIMEOUT_S", "3"))
# Demo arrivals keep a fresh installation busy; turn off on a real fleet.
FLEET_DEMO_WORKLOAD = _env_bool("FLEET_DEMO_WORKLOAD", True)
# Seeded node failures (crash, GPU loss, slowdown) injected into the live fleet each tick. On for
# the demo; off under pytest (which sets PYTEST_VERSION) unless a test turns it on.
FLEET_FAILURES = _env_bool("FLEET_FAILURES", "PYTEST_VERSION" not in os.environ)

CELERY_BEAT_SCHEDULE = {
    "fleet-heartbeat": {
        "task": "scheduling.tasks.fleet_heartbeat",
        "schedule": float(os.environ.get("FLEET_HEARTBEAT_INTERVAL_S", "1.0")),
        "options": {"expires": 5},
    },
    "fleet-cycle": {
        "task": "scheduling.tasks.fleet_cycle",
        "schedule": FLEET_CYCLE_INTERVAL_S,
        "options": {"expires": 5 * FLEET_CYCLE_INTERVAL_S},
    },
}
if FLEET_DEMO_WORKLOAD:
    CELERY_BEAT_SCHEDULE["demo-load"] = {
        "task": "scheduling.tasks.demo_load",
        "schedule": 2.0,
        "options": {"expires": 10},
    }

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
