"""Run the whole product on one machine: migrate, seed the demo when asked to, then the embedded
Redis (when no ``REDIS_URL`` is set), daphne, a Celery worker and Celery beat, supervised: a
process that dies is restarted (``portal.supervisor``). Ctrl-C (or SIGTERM) stops every one."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from portal import embedded_redis
from portal.demo import DEMO_LOGINS, DEMO_PASSWORD
from portal.supervisor import Child, RedisChild, Supervisor


class Command(BaseCommand):
    help = "Migrate, seed the demo (FLEETLINE_DEMO) and run Redis, web server, worker and beat, supervised."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        if settings.FLEETLINE_DEMO:
            call_command("seed_demo")
        stopping = False

        def request_stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        with _embedded_redis_claimed(settings.EMBEDDED_REDIS_SOCKET) if settings.EMBEDDED_REDIS else nullcontext():
            supervisor = Supervisor(self._children(host=host, port=port))
            try:
                supervisor.start()
                self._print_banner(host=host, port=port)
                supervisor.run(lambda: stopping)
            finally:
                supervisor.stop()
                self.stdout.write("Fleetline stopped.")

    def _children(self, *, host: str, port: int) -> list[Child]:
        python = sys.executable
        env = {**os.environ, "REDIS_URL": settings.REDIS_URL, "PYTHONUNBUFFERED": "1"}
        schedule_file = str(settings.VAR_DIR / "celerybeat-schedule")
        celery = [python, "-m", "celery", "-A", "portal"]
        children = [
            Child(
                "web", [python, "-m", "portal.daphne", "-b", host, "-p", str(port), "portal.asgi:application"], env=env
            ),
            Child(
                "worker",
                [*celery, "worker", "--concurrency=2", "-Q", settings.CELERY_WORKER_QUEUES, "-n", "fleetline@%h"],
                env=env,
            ),
            Child("beat", [*celery, "beat", "-s", schedule_file], env=env),
        ]
        if settings.EMBEDDED_REDIS:
            children.insert(0, RedisChild(settings.EMBEDDED_REDIS_SOCKET))
        return children

    def _print_banner(self, *, host: str, port: int) -> None:
        lines = ["", f"Fleetline is running on http://{host}:{port}/"]
        if settings.FLEETLINE_DEMO:
            lines += [
                f"Demo logins (password '{DEMO_PASSWORD}'):",
                *(f"  {name:<8} {role}" for name, role in DEMO_LOGINS),
            ]
        elif not get_user_model().objects.exists():
            lines.append("No users yet: create the first admin with `python manage.py createsuperuser`.")
        lines += ["Press Ctrl-C to stop.", ""]
        self.stdout.write("\n".join(lines))


@contextmanager
def _embedded_redis_claimed(socket_path: Path) -> Iterator[None]:
    """Hold a lock beside the embedded Redis's socket while this supervisor runs it: a second
    ``manage.py up`` in the same directory is refused instead of taking the first one's server.
    A server that answers there without the lock held was left behind: it is shut down."""
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    with open(socket_path.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(f"Fleetline is already running with the embedded Redis on {socket_path}.") from None
        embedded_redis.shut_down_leftover(socket_path)
        yield
