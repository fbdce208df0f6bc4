"""A small hand-written ledger for January 2026 whose figures are computed by hand in the tests:
two accelerator types, two H100 rates (the price changes on the 16th), a preemption, a node
failure and borrowing. The fleet epoch is 2026-01-01 00:00 UTC, so fleet day N of January
starts at (N - 1) x 86400 fleet seconds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from django.contrib.auth.models import Group, User

from finance.models import Rate
from scheduling.models import AcceleratorType, FleetClock, FleetSample, Job, JobUsage
from tenants.models import FleetPolicy, Membership, PriorityClass, Team
from tenants.roles import FINANCE, FLEET_ADMIN
from tests.factories import MembershipFactory, QuotaFactory, TeamFactory, UserFactory

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
H = 3600.0


@dataclass
class Books:
    vision: Team  # guaranteed 8 H100; borrows on the 20th
    search: Team  # no guarantee: everything it runs is borrowed
    h100: AcceleratorType
    a100: AcceleratorType
    finance: User
    admin: User
    lead: User  # leads vision
    member: User  # member of vision
    outsider: User
    jobs: list[Job]


def _user(name: str, group: str | None = None) -> User:
    user = UserFactory(username=name, email=f"{name}@example.com")
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def _day_s(day: int) -> float:
    return (day - 1) * 86400.0


def _usage(job: Job, day: int, gpus: int, hours: float, *, lost_gpu_h: float = 0.0, borrowed_gpus: int = 0) -> float:
    allocated = gpus * hours * H
    JobUsage.objects.create(
        job=job,
        day=date(2026, 1, day),
        team=job.team,
        accelerator_type=job.accelerator_type,
        kind=job.kind,
        allocated_gpu_s=allocated,
        useful_gpu_s=allocated - lost_gpu_h * H,
        lost_gpu_s=lost_gpu_h * H,
        borrowed_gpu_s=borrowed_gpus * hours * H,
    )
    return allocated


def _fleet_day(day: int, *, allocated_gpu_s: float, down_gpu_s: float = 0.0) -> None:
    """One ledger tick that stands for the whole day on a 32-GPU fleet."""
    capacity = 32 * 86400.0
    FleetSample.objects.create(
        sim_time_s=_day_s(day) + 86400.0 - 1.0,
        interval_s=86400.0,
        recorded_at=EPOCH,
        capacity_gpus=32,
        healthy_gpus=32,
        serving_gpus=0,
        training_gpus=0,
        batch_gpus=0,
        idle_gpu_s=capacity - allocated_gpu_s - down_gpu_s,
        down_gpu_s=down_gpu_s,
        pending_jobs=0,
        running_jobs=0,
    )


def books_build() -> Books:
    FleetClock.objects.update_or_create(pk=1, defaults={"epoch": EPOCH, "sim_now_s": 40 * 86400.0})
    FleetPolicy.objects.update_or_create(pk=1, defaults={"charge_model": FleetPolicy.ChargeModel.USAGE})
    h100 = AcceleratorType.objects.create(name="H100")
    a100 = AcceleratorType.objects.create(name="A100")
    vision = TeamFactory(name="Vision", slug="vision")
    search = TeamFactory(name="Search", slug="search")
    QuotaFactory(team=vision, accelerator_type=h100, guaranteed=8, borrow_limit=16)
    training = PriorityClass.objects.create(name="train", value=300, kind="training")
    serving = PriorityClass.objects.create(name="serve", value=900, kind="serving", preemptible=False)
    Rate.objects.create(accelerator_type=h100, price_per_gpu_hour=Decimal("2.00"), effective_from=date(2026, 1, 1))
    Rate.objects.create(accelerator_type=h100, price_per_gpu_hour=Decimal("3.00"), effective_from=date(2026, 1, 16))
    Rate.objects.create(accelerator_type=a100, price_per_gpu_hour=Decimal("1.50"), effective_from=date(2025, 12, 1))
    lead, member = _user("lena"), _user("max")
    MembershipFactory(team=vision, user=lead, role=Membership.Role.LEAD)
    MembershipFactory(team=vision, user=member, role=Membership.Role.MEMBER)
    carol = _user("carol")
    MembershipFactory(team=search, user=carol, role=Membership.Role.LEAD)

    def job(name: str, team: Team, accelerator: AcceleratorType, kind: str, user: User) -> Job:
        return Job.objects.create(
            team=team,
            submitted_by=user,
            name=name,
            kind=kind,
            priority_class=serving if kind == "serving" else training,
            accelerator_type=accelerator,
            gpus=8,
            duration_s=86400.0,
            submit_s=0.0,
            state=Job.State.COMPLETED,
        )

    long_run = job("long-run", vision, h100, "training", lead)
    sweep = job("sweep", vision, h100, "training", member)
    api = job("api", search, a100, "serving", carol)
    # Jan 5: search serves on 4 A100 all day, all of it borrowed (it has no guarantee).
    on_5th = _usage(api, 5, 4, 24.0, borrowed_gpus=4)
    # Jan 10: 8 H100 for 10 h at 2.00.
    on_10th = _usage(long_run, 10, 8, 10.0)
    # Jan 20, at 3.00: long-run runs 5 h and is preempted, rolling back 1 h of 8 GPUs; sweep runs
    # 16 GPUs for 2 h, 8 of them borrowed, and loses 4 GPU-h to a node failure, which also keeps
    # 8 GPUs down for 3 h.
    on_20th = _usage(long_run, 20, 8, 5.0, lost_gpu_h=8.0) + _usage(sweep, 20, 16, 2.0, lost_gpu_h=4.0, borrowed_gpus=8)
    _fleet_day(5, allocated_gpu_s=on_5th)
    _fleet_day(10, allocated_gpu_s=on_10th)
    _fleet_day(20, allocated_gpu_s=on_20th, down_gpu_s=8 * 3 * H)
    return Books(
        vision=vision,
        search=search,
        h100=h100,
        a100=a100,
        finance=_user("fiona", FINANCE),
        admin=_user("adam", FLEET_ADMIN),
        lead=lead,
        member=member,
        outsider=_user("olga"),
        jobs=[long_run, sweep, api],
    )
