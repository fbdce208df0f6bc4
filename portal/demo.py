"""Demo data for a fresh installation: a small two-pod fleet, two departments, four teams, and
the demo logins. Only the demo (``make run``, FLEETLINE_DEMO=1) seeds it, on an empty database."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction

from finance.demo import finance_demo_seed
from scheduling.models import AcceleratorType, Node, Pod, Rack, ServingDeployment
from tenants.models import Department, Membership, PriorityClass, Team
from tenants.roles import FINANCE, FLEET_ADMIN
from tenants.services.demo import demo_quotas_seed

DEMO_PASSWORD = "fleetline"
DEMO_LOGINS = (
    ("admin", "fleet admin: approves quota, sets policy"),
    ("finance", "finance: utilisation and chargeback reports"),
    ("lead", "lead of the first team: submits jobs, requests quota"),
    ("member", "member of the first team: submits jobs"),
)
# (pod, accelerator, racks, nodes per rack)
DEMO_PODS = (("pod-a", "H100", 4, 8), ("pod-b", "A100", 4, 8))
DEMO_TEAMS = (
    ("Research", "Language Models", "language-models"),
    ("Research", "Vision", "vision"),
    ("Product", "Search Serving", "search-serving"),
    ("Product", "Recommendations", "recommendations"),
)


def demo_is_needed() -> bool:
    return not Node.objects.exists() and not User.objects.exists()


@transaction.atomic
def demo_seed(*, gpus_per_node: int = 8) -> None:
    """Create the demo fleet, teams and users. Idempotent on an empty database only. On a real
    backend the fleet is the cluster's (read by the first tick), and serving deployments, which
    run no command, are left out."""
    real = settings.FLEETLINE_BACKEND != "modelled"
    if real:
        for _, accelerator, _, _ in DEMO_PODS:
            AcceleratorType.objects.get_or_create(name=accelerator, defaults={"memory_gb": 80})
    else:
        _seed_fleet(gpus_per_node=gpus_per_node)
    teams = _seed_teams()
    _seed_users(first_team=teams[0])
    demo_quotas_seed()
    if not real:
        _seed_deployments()
    finance_demo_seed()


def _seed_fleet(*, gpus_per_node: int) -> None:
    for pod_name, accelerator, racks, nodes_per_rack in DEMO_PODS:
        accelerator_type, _ = AcceleratorType.objects.get_or_create(name=accelerator, defaults={"memory_gb": 80})
        pod = Pod.objects.create(name=pod_name)
        for r in range(racks):
            rack = Rack.objects.create(pod=pod, name=f"{pod_name}-r{r + 1}")
            Node.objects.bulk_create(
                Node(
                    rack=rack,
                    name=f"{rack.name}-n{n + 1:02d}",
                    accelerator_type=accelerator_type,
                    gpus=gpus_per_node,
                    healthy_gpus=gpus_per_node,
                )
                for n in range(nodes_per_rack)
            )


def _seed_teams() -> list[Team]:
    teams = []
    for department_name, team_name, slug in DEMO_TEAMS:
        department, _ = Department.objects.get_or_create(name=department_name)
        teams.append(Team.objects.create(department=department, name=team_name, slug=slug))
    return teams


def _seed_users(*, first_team: Team) -> None:
    admins = Group.objects.get_or_create(name=FLEET_ADMIN)[0]
    finance = Group.objects.get_or_create(name=FINANCE)[0]
    admin = User.objects.create_superuser("admin", "admin@fleetline.local", DEMO_PASSWORD)
    admin.groups.add(admins)
    User.objects.create_user("finance", "finance@fleetline.local", DEMO_PASSWORD).groups.add(finance)
    lead = User.objects.create_user("lead", "lead@fleetline.local", DEMO_PASSWORD)
    member = User.objects.create_user("member", "member@fleetline.local", DEMO_PASSWORD)
    Membership.objects.create(user=lead, team=first_team, role=Membership.Role.LEAD)
    Membership.objects.create(user=member, team=first_team, role=Membership.Role.MEMBER)


# (team slug, name, accelerator, GPUs per replica, min replicas, max replicas, peak hour)
DEMO_DEPLOYMENTS = (
    ("search-serving", "search-api", "H100", 8, 2, 8, 14.0),
    ("recommendations", "recs-ranker", "A100", 4, 2, 10, 20.0),
)


def _seed_deployments() -> None:
    serving = PriorityClass.objects.filter(kind=PriorityClass.Kind.SERVING).order_by("-value").first()
    if serving is None:
        return
    for slug, name, accelerator, gpus, low, high, peak in DEMO_DEPLOYMENTS:
        ServingDeployment.objects.create(
            team=Team.objects.get(slug=slug),
            name=name,
            priority_class=serving,
            accelerator_type=AcceleratorType.objects.get(name=accelerator),
            gpus_per_replica=gpus,
            min_replicas=low,
            max_replicas=high,
            peak_hour=peak,
        )
