"""Run the whole product on one machine: migrate, seed, then daphne, a Celery worker and
Celery beat as one supervised group. Ctrl-C (or SIGTERM) stops every one of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from portal import embedded_redis
from portal.demo import DEMO_LOGINS, DEMO_PASSWORD

STOP_GRACE_S = 10.0


class Command(BaseCommand):
    help = "Migrate, seed demo data if empty, and run web server, worker and beat together."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        children = self._start_children(host=host, port=port)
        self._print_banner(host=host, port=port)
        stopping = False

        def request_stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        try:
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} exited with {child.returncode}; stopping.")
                        stopping = True
                time.sleep(0.3)
        finally:
            self._stop_children(children)
            if not os.environ.get("REDIS_URL"):
                embedded_redis.stop(settings.EMBEDDED_REDIS_SOCKET)
            self.stdout.write("Fleetline stopped.")

    def _start_children(self, *, host: str, port: int) -> dict[str, subprocess.Popen[bytes]]:
        python = sys.executable
        env = {**os.environ, "REDIS_URL": settings.REDIS_URL, "PYTHONUNBUFFERED": "1"}
        schedule_file = str(settings.VAR_DIR / "celerybeat-schedule")
        commands = {
            "web": [python, "-m", "daphne", "-b", host, "-p", str(port), "portal.asgi:application"],
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--loglevel=WARNING",
                "--concurrency=2",
                "-Q",
                settings.CELERY_WORKER_QUEUES,
                "-n",
                "fleetline@%h",
            ],
            "beat": [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "--loglevel=WARNING",
                "-s",
                schedule_file,
            ],
        }
        # Each child gets its own session so the terminal's Ctrl-C reaches only this
        # supervisor, which then stops every child's whole process group in order.
        return {name: subprocess.Popen(cmd, env=env, start_new_session=True) for name, cmd in commands.items()}

    def _stop_children(self, children: dict[str, subprocess.Popen[bytes]]) -> None:
        for child in children.values():
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(child, signal.SIGKILL)

    def _print_banner(self, *, host: str, port: int) -> None:
        lines = [
            "",
            f"Fleetline is running on http://{host}:{port}/",
            f"Demo logins (password '{DEMO_PASSWORD}'):",
            *(f"  {name:<8} {role}" for name, role in DEMO_LOGINS),
            "Press Ctrl-C to stop.",
            "",
        ]
        self.stdout.write("\n".join(lines))


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except ProcessLookupError:
        pass
