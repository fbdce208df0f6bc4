"""Run the test provider: ``python -m tests.oidc_provider.serve PORT`` with OIDC_PROVIDER_DB,
OIDC_PROVIDER_ISSUER and OIDC_PROVIDER_CONTROL_TOKEN in the environment. Migrates its database,
then serves on 127.0.0.1:PORT until terminated."""

from __future__ import annotations

import os
import sys

import django
from django.core.management import call_command
from django.core.servers.basehttp import run
from django.core.wsgi import get_wsgi_application


def main() -> None:
    port = int(sys.argv[1])
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    run("127.0.0.1", port, get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main()
