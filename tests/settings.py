"""Settings for the test session and the processes it starts: the product's own settings
(``portal.settings``) with a key of their own, since DEBUG is off by default and a key is then
required. pytest-django loads this module (pyproject.toml); child processes inherit it with
the environment."""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "fleetline-tests-only-not-secret")

from portal.settings import *  # noqa: E402, F403

# A tick bounds its transaction's idle time with SET LOCAL; inside a test's own transaction that
# bound outlives the tick, so slow work later in the same test (a schema build on a loaded box)
# would lose the connection. Tests that exercise the bound set it in their child's environment.
FLEET_CYCLE_IDLE_TIMEOUT_S = float(os.environ.get("FLEET_CYCLE_IDLE_TIMEOUT_S", "120"))

# The production hasher (PBKDF2, a million rounds) costs about a second per password on a busy
# two-core machine, once per user a factory makes and again per login a browser test's server
# checks. The tests prove that passwords are checked, not how slowly: every process of the test
# session (this one and the servers it starts, which inherit these settings) hashes with MD5.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Sockets get no heartbeat of their web process's own unless a test asks for one: tests that wait
# for a socket's next message, or for none, would otherwise get a heartbeat each second.
FLEET_SOCKET_HEARTBEAT_S = float(os.environ.get("FLEET_SOCKET_HEARTBEAT_S", "0"))
