"""Settings and their defaults, read in fresh processes the way each command reads them: importing
them starts nothing, the safe choice is the default, and the production profile passes Django's
deployment checks."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
# Reading a setting imports the settings module, where every value and every refusal comes from;
# django.setup() on top (the apps, a second or two of imports) adds nothing to what is read.
PROBE = "import json; from django.conf import settings as s; print(json.dumps({n: str(getattr(s, n)) for n in NAMES}))"  # noqa: E501
SET_UP = "import django; django.setup(); "
# Variables that would change what the probes read.
OURS = {
    "DEBUG",
    "SECRET_KEY",
    "FLEETLINE_DEMO",
    "FLEET_DEMO_WORKLOAD",
    "FLEET_FAILURES",
    "REDIS_URL",
    "DATABASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "LOG_LEVEL",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER",
    "FLEETLINE_VAR_DIR",
    "FLEETLINE_REDIS_SOCKET",
}


@pytest.fixture
def var_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="fl-set-"))  # short: it holds a unix socket path
    yield directory
    subprocess.run(["rm", "-rf", str(directory)], check=False)


def _env(var_dir: Path, **overrides: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in OURS}
    env.update({"FLEETLINE_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings", **overrides})
    return env


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _settings(var_dir: Path, names: list[str], *, set_up: bool = False, **env: str) -> dict[str, str]:
    """The settings ``names`` as a fresh process reads them; ``set_up`` also sets Django up first."""
    code = f"NAMES = {names!r}; {SET_UP if set_up else ''}{PROBE}"
    result = _run([sys.executable, "-c", code], _env(var_dir, **env))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _redis_servers_on(socket_dir: Path) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "redis-server" in text and str(socket_dir) in text:
            found.append(int(cmdline.parent.name))
    return found


def test_a_management_command_without_redis_url_starts_no_redis_server(var_dir: Path) -> None:
    socket_path = var_dir / "redis" / "redis.sock"
    env = _env(var_dir, DEBUG="1", FLEETLINE_REDIS_SOCKET=str(socket_path))

    result = _run([sys.executable, "manage.py", "check"], env)

    assert result.returncode == 0, result.stderr
    assert not socket_path.exists()
    assert _redis_servers_on(var_dir) == []
    probed = _settings(var_dir, ["REDIS_URL"], set_up=True, DEBUG="1", FLEETLINE_REDIS_SOCKET=str(socket_path))
    assert probed["REDIS_URL"] == f"unix://{socket_path}"
    assert _redis_servers_on(var_dir) == []


def test_debug_is_off_by_default_and_then_a_secret_key_is_required(var_dir: Path) -> None:
    result = _run([sys.executable, "-c", f"NAMES = ['DEBUG']; {PROBE}"], _env(var_dir))
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off." in result.stderr
    assert _settings(var_dir, ["DEBUG"], SECRET_KEY="k" * 50) == {"DEBUG": "False"}
    assert _settings(var_dir, ["DEBUG"], DEBUG="1") == {"DEBUG": "True"}


def test_the_demo_and_its_parts_are_off_by_default_and_on_together_with_fleetline_demo(var_dir: Path) -> None:
    names = ["FLEETLINE_DEMO", "FLEET_DEMO_WORKLOAD", "FLEET_FAILURES"]
    assert _settings(var_dir, names, DEBUG="1") == dict.fromkeys(names, "False")
    assert _settings(var_dir, names, DEBUG="1", FLEETLINE_DEMO="1") == dict.fromkeys(names, "True")
    assert _settings(var_dir, names, DEBUG="1", FLEETLINE_DEMO="1", FLEET_FAILURES="0")["FLEET_FAILURES"] == "False"


def test_https_settings_come_from_the_environment(var_dir: Path) -> None:
    names = [
        "SECURE_SSL_REDIRECT",
        "SECURE_HSTS_SECONDS",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_PROXY_SSL_HEADER",
    ]
    assert _settings(var_dir, names, DEBUG="1") == {
        "SECURE_SSL_REDIRECT": "False",
        "SECURE_HSTS_SECONDS": "0",
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "SECURE_PROXY_SSL_HEADER": "None",
    }
    assert _settings(
        var_dir,
        names,
        DEBUG="1",
        SECURE_SSL_REDIRECT="1",
        SECURE_HSTS_SECONDS="3600",
        SESSION_COOKIE_SECURE="1",
        CSRF_COOKIE_SECURE="true",
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
    ) == {
        "SECURE_SSL_REDIRECT": "True",
        "SECURE_HSTS_SECONDS": "3600",
        "SESSION_COOKIE_SECURE": "True",
        "CSRF_COOKIE_SECURE": "True",
        "SECURE_PROXY_SSL_HEADER": "('HTTP_X_FORWARDED_PROTO', 'https')",
    }


def _production_env(var_dir: Path, **overrides: str) -> dict[str, str]:
    production = {
        "DJANGO_SETTINGS_MODULE": "portal.settings_production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": "postgres://fleetline@db.internal:5432/fleetline",
        "REDIS_URL": "redis://redis.internal:6379/0",
        "ALLOWED_HOSTS": "fleet.example.com",
    }
    return _env(var_dir, **{**production, **overrides})


def test_the_production_profile_passes_the_deployment_checks(var_dir: Path) -> None:
    result = _run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], _production_env(var_dir)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_production_profile_is_secure_and_demo_free_by_default(var_dir: Path) -> None:
    names = [
        "DEBUG",
        "FLEETLINE_DEMO",
        "FLEET_DEMO_WORKLOAD",
        "FLEET_FAILURES",
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
    ]
    result = _run([sys.executable, "-c", f"NAMES = {names!r}; {PROBE}"], _production_env(var_dir))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "DEBUG": "False",
        "FLEETLINE_DEMO": "False",
        "FLEET_DEMO_WORKLOAD": "False",
        "FLEET_FAILURES": "False",
        "SECURE_SSL_REDIRECT": "True",
        "SESSION_COOKIE_SECURE": "True",
        "CSRF_COOKIE_SECURE": "True",
        "SECURE_HSTS_SECONDS": str(365 * 24 * 3600),
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"DEBUG": "1"}, "DEBUG must be off in production"),
        ({"REDIS_URL": ""}, "Production settings need REDIS_URL"),
        ({"DATABASE_URL": "", "SECRET_KEY": ""}, "Production settings need SECRET_KEY, DATABASE_URL"),
    ],
)
def test_the_production_profile_refuses_debug_and_missing_services(
    var_dir: Path, overrides: dict[str, str], message: str
) -> None:
    result = _run([sys.executable, "manage.py", "check"], _production_env(var_dir, **overrides))
    assert result.returncode != 0
    assert message in result.stderr


def test_log_lines_name_time_level_logger_and_process_at_the_log_level(var_dir: Path) -> None:
    code = "import django, logging; django.setup(); log = logging.getLogger('fleetline.probe'); log.info('hidden'); log.warning('shown')"  # noqa: E501
    result = _run([sys.executable, "-c", code], _env(var_dir, DEBUG="1", LOG_LEVEL="warning"))
    assert result.returncode == 0, result.stderr
    assert "hidden" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.endswith(" WARNING fleetline.probe[" + line.split("[")[1].split("]")[0] + "] shown")
    assert line[:4].isdigit() and "T" in line.split()[0]


def test_an_anonymous_api_call_is_answered_401_with_a_bearer_challenge(db: None) -> None:
    response = Client().get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.django_db
def test_the_demo_seed_is_refused_outside_the_demo() -> None:
    from django.contrib.auth.models import User

    with override_settings(FLEETLINE_DEMO=False), pytest.raises(CommandError, match="FLEETLINE_DEMO=1"):
        call_command("seed_demo")
    assert not User.objects.exists()
    with override_settings(FLEETLINE_DEMO=True):
        call_command("seed_demo", stdout=open(os.devnull, "w"))
    assert User.objects.filter(username="admin").exists()


def test_a_celery_worker_logs_in_the_same_format_at_the_log_level(var_dir: Path) -> None:
    """Celery would reset the root logger to its own --loglevel (WARNING by default) and hide the
    cycle's per-tick INFO lines; the worker keeps the settings' logging instead."""
    code = (
        "import logging; from portal.celery import app; "
        "from celery.signals import setup_logging; setup_logging.send(sender=None); "
        "logging.getLogger('fleetline.cycle').info('tick line'); logging.getLogger('celery').debug('hidden')"
    )
    result = _run([sys.executable, "-c", code], _env(var_dir, DEBUG="1", LOG_LEVEL="info"))
    assert result.returncode == 0, result.stderr
    assert " INFO fleetline.cycle[" in result.stderr and result.stderr.rstrip().endswith("] tick line")
    assert "hidden" not in result.stderr
