"""Run as a child process by the fault suite, on the suite's own database: migrate it, seed the
demo fleet and teams (``portal.demo``), give one member of the first team an API v1 token, and print
what a client needs to submit jobs as one JSON line.

The suite's database lives on a PostgreSQL server that the suite restarts, so it is set up here,
by the product's own code, rather than by pytest-django on the shared test database."""

from __future__ import annotations

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402

from api.services import api_token_create  # noqa: E402
from portal.demo import demo_seed  # noqa: E402
from scheduling.models import AcceleratorType  # noqa: E402
from tenants.models import Membership, PriorityClass  # noqa: E402


def main() -> None:
    call_command("migrate", interactive=False, verbosity=0)
    demo_seed()
    member = User.objects.get(username="member")
    team = Membership.objects.filter(user=member).select_related("team").get().team
    token = api_token_create(user=member, name="fault suite")
    accelerator = AcceleratorType.objects.get(name="H100")
    training = PriorityClass.objects.get(name="training")
    print(
        json.dumps(
            {
                "token": token.secret,
                "team": team.slug,
                "user_id": member.pk,
                "priority_class": training.name,
                "accelerator": accelerator.name,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
