"""Job notices after a tick: one summary per submitter per tick, their preferences respected,
mails rendered by the worker one per user, a fixed number of statements however many jobs."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.core import mail
from django.test import TestCase
from pytest_django import DjangoAssertNumQueries

from core.groups import user_group
from portal.celery import app as celery_app
from scheduling.live.notices import job_notice_kind, job_notice_mails, job_notices_send
from scheduling.models import Job, SchedulerEvent
from scheduling.tick_outcome import JobChange
from tenants.models import NoticeKind, Notification
from tenants.selectors import NoticeChannels
from tenants.services import notification_preferences_save
from tests.factories import UserFactory
from tests.scheduling.conftest import Fleet

Kind = SchedulerEvent.Kind


@pytest.fixture
def mail_inline() -> Iterator[None]:
    """Celery runs tasks in this process, so the worker's mails land in Django's locmem outbox."""
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = eager


def _by(user: User, job: Job) -> Job:
    Job.objects.filter(pk=job.pk).update(submitted_by=user)
    return job


def _change(job: Job, event: str, cause: str = "") -> JobChange:
    return JobChange(job.pk, job.team_id, "running", event, f"{event} message", cause)


@pytest.mark.parametrize(
    ("event", "cause", "kind"),
    [
        (Kind.STARTED, "", NoticeKind.JOB_STARTED),
        (Kind.COMPLETED, "", NoticeKind.JOB_FINISHED),
        (Kind.TIMED_OUT, "", NoticeKind.JOB_FAILED),
        (Kind.FAILED, "", NoticeKind.JOB_FAILED),  # its command failed on a real cluster
        (Kind.EVICTED, "preempted-by:17", NoticeKind.JOB_PREEMPTED),
        (Kind.EVICTED, "preempted", NoticeKind.JOB_PREEMPTED),
        (Kind.EVICTED, "node-failed", NoticeKind.JOB_FAILED),
        (Kind.EVICTED, "node-degraded", NoticeKind.JOB_FAILED),
        (Kind.RESIZED, "", None),
        (Kind.PREEMPTING, "", None),
    ],
)
def test_each_change_tells_its_submitter_of_the_kind_it_is(event: str, cause: str, kind: str | None) -> None:
    assert job_notice_kind(JobChange(1, 1, "running", event, "", cause)) == kind


def test_a_job_evicted_and_started_again_in_one_tick_is_told_of_its_eviction_by_its_cause() -> None:
    moved = JobChange(1, 1, "running", Kind.STARTED, "Started on 1 node", "node-slow", "Moved off slow node n1, …")
    preempted = JobChange(1, 1, "running", Kind.STARTED, "Started on 1 node", "preempted-by:3", "Preempted by job 3")

    assert job_notice_kind(moved) == NoticeKind.JOB_FAILED
    assert job_notice_kind(preempted) == NoticeKind.JOB_PREEMPTED


def test_the_notice_of_a_requeued_job_says_why_and_from_where_and_never_that_it_failed(fleet: Fleet) -> None:
    lead = UserFactory()
    requeued = _by(lead, fleet.submit(gpus=4, name="pretrain"))
    restarted = _by(UserFactory(), fleet.submit(gpus=4, name="finetune"))
    evicted = "Evicted by node failure on node r1-n1, requeued from its last checkpoint at step 12 (120 s of work)"
    moved = "Moved off slow node r1-n2, requeued from its last checkpoint at step 30 (300 s of work)"

    job_notices_send(
        changes=[
            JobChange(requeued.pk, requeued.team_id, "pending", Kind.EVICTED, evicted, "node-failed"),
            JobChange(restarted.pk, restarted.team_id, "running", Kind.STARTED, "Started", "node-slow", moved),
        ]
    )

    (notice,) = Notification.objects.filter(user=lead)
    assert notice.message == f"Your job pretrain was {evicted[0].lower()}{evicted[1:]}."
    assert "failed" not in notice.message
    (other,) = Notification.objects.exclude(user=lead)
    assert other.message.startswith("Your job finetune was moved off slow node r1-n2, requeued from its last")
    assert other.message.endswith("it restarted at once.")


def test_a_tick_gives_each_submitter_one_summary_with_links_to_their_jobs(fleet: Fleet) -> None:
    lead, member = UserFactory(username="lead"), UserFactory(username="member")
    leads = [_by(lead, fleet.submit(gpus=4, name=f"train-{i}")) for i in range(3)]
    members = _by(member, fleet.submit(gpus=4, name="eval"))
    unowned = fleet.submit(gpus=4, name="nobody-s")

    fleet.tick()

    assert Job.objects.filter(state=Job.State.RUNNING).count() == 5
    (lead_notice,) = Notification.objects.filter(user=lead)
    assert lead_notice.message == "3 jobs started: train-0, train-1, train-2."
    assert lead_notice.url == "/jobs/?user=lead"
    assert lead_notice.kind == NoticeKind.JOB_STARTED
    assert lead_notice.jobs == [{"id": job.pk, "name": job.name, "kind": NoticeKind.JOB_STARTED} for job in leads]
    (member_notice,) = Notification.objects.filter(user=member)
    assert member_notice.message == "Your job eval started."
    assert member_notice.url == f"/jobs/{members.pk}/"
    assert Notification.objects.count() == 2  # the job with no submitter tells nobody
    assert unowned.submitted_by is None

    fleet.tick()  # nothing changed: no new notice
    assert Notification.objects.count() == 2


def test_a_summary_counts_each_kind_in_order_and_names_at_most_five_jobs(fleet: Fleet) -> None:
    lead = UserFactory()
    jobs = [_by(lead, fleet.submit(gpus=1, name=f"j{i}")) for i in range(8)]
    changes = [_change(job, Kind.STARTED) for job in jobs[:5]]
    changes += [
        _change(jobs[5], Kind.COMPLETED),
        _change(jobs[6], Kind.EVICTED, "node-failed"),
        _change(jobs[7], Kind.EVICTED, "preempted-by:1"),
    ]

    sent = job_notices_send(changes=changes)

    assert sent.notices == 1
    (notice,) = Notification.objects.filter(user=lead)
    # A node failure requeued j6 from its checkpoint: it did not fail.
    assert notice.message == "5 jobs started, 1 preempted, 1 requeued, 1 finished: j0, j1, j2, j3, j4 and 3 more."
    assert notice.kind == ""  # several kinds
    assert [job["name"] for job in notice.jobs] == ["j0", "j1", "j2", "j3", "j4", "j7", "j6", "j5"]


def test_the_summary_reaches_the_users_open_pages_with_the_unread_count(transactional_db: None) -> None:
    from tests.scheduling.conftest import build_fleet

    fleet = build_fleet()
    lead = UserFactory()
    Notification.objects.create(user=lead, message="older, unread")
    job = _by(lead, fleet.submit(gpus=4, name="train"))
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(lead.pk), channel)
    try:
        fleet.tick()
        message = async_to_sync(layer.receive)(channel)
    finally:
        async_to_sync(layer.group_discard)(user_group(lead.pk), channel)
    assert message["payload"] == {
        "v": 1,
        "kind": "notice",
        "message": "Your job train started.",
        "url": f"/jobs/{job.pk}/",
        "unread": 2,
    }


def test_in_app_off_for_a_kind_writes_no_notice_of_it(fleet: Fleet) -> None:
    lead = UserFactory()
    notification_preferences_save(
        user=lead, choices={NoticeKind.JOB_STARTED: NoticeChannels(in_app=False, email=False)}
    )
    started, finished = (_by(lead, fleet.submit(gpus=1, name=name)) for name in ("a", "b"))

    job_notices_send(changes=[_change(started, Kind.STARTED)])
    assert not Notification.objects.filter(user=lead).exists()

    job_notices_send(changes=[_change(started, Kind.STARTED), _change(finished, Kind.COMPLETED)])
    (notice,) = Notification.objects.filter(user=lead)
    assert notice.message == "Your job b finished."  # the started job is left out, not counted


@pytest.mark.django_db(transaction=True)
def test_mails_follow_the_preferences_one_per_user_per_tick_with_each_job_linked(
    mail_inline: None, settings: object
) -> None:
    from tests.scheduling.conftest import build_fleet

    fleet = build_fleet()
    lead = UserFactory(username="lead", first_name="Ada", email="lead@example.com")
    quiet = UserFactory(username="quiet", email="quiet@example.com")
    no_address = UserFactory(username="no-address")
    notification_preferences_save(user=lead, choices={NoticeKind.JOB_STARTED: NoticeChannels(True, True)})
    notification_preferences_save(user=quiet, choices={NoticeKind.JOB_FAILED: NoticeChannels(True, False)})
    train = _by(lead, fleet.submit(gpus=4, name="train"))
    doomed = _by(lead, fleet.submit(gpus=4, name="doomed", time_limit_s=60.0))
    _by(quiet, fleet.submit(gpus=4, name="quiet-one", time_limit_s=60.0))
    _by(no_address, fleet.submit(gpus=4, name="unmailed", time_limit_s=60.0))

    fleet.tick()  # all four start: only the lead asked for mail about starts
    assert [m.to for m in mail.outbox] == [["lead@example.com"]]
    started = mail.outbox[0]
    assert started.subject == "[Fleetline] 2 jobs started"
    assert started.body.startswith("Hello Ada,\n\nIn the fleet's last scheduling cycle:\n")
    assert f"- train (#{train.pk}) started: Started on 1 node, 4 GPUs" in started.body
    assert f"http://localhost:8000/jobs/{train.pk}/" in started.body
    assert f"http://localhost:8000/jobs/{doomed.pk}/" in started.body
    assert "http://localhost:8000/settings/notifications/" in started.body

    mail.outbox.clear()
    fleet.tick(wall_step_s=2.0)  # past their 60 s limits: three fail, the default mails failures
    assert Job.objects.filter(state=Job.State.TIMED_OUT).count() == 3
    assert [m.to for m in mail.outbox] == [["lead@example.com"]]  # quiet turned it off; no address
    assert mail.outbox[0].subject == "[Fleetline] Your job doomed failed"
    assert "Killed at its time limit" in mail.outbox[0].body
    assert Notification.objects.filter(user=quiet, message="Your job quiet-one failed.").exists()


def test_the_worker_skips_jobs_that_are_gone_and_people_without_an_address(fleet: Fleet) -> None:
    lead, no_address = UserFactory(email="lead@example.com"), UserFactory()
    job = _by(lead, fleet.submit(gpus=1, name="kept"))
    rows = [
        [lead.pk, job.pk, NoticeKind.JOB_FAILED, "Killed at its time limit"],
        [lead.pk, 999_999, NoticeKind.JOB_FAILED, "gone"],
        [no_address.pk, job.pk, NoticeKind.JOB_FAILED, "x"],
    ]
    (only,) = job_notice_mails(items=rows)
    assert only.to == "lead@example.com"
    assert only.subject == "[Fleetline] Your job kept failed"


def test_a_ticks_notices_take_the_same_statements_for_two_jobs_as_for_forty(
    fleet: Fleet, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    def changes_for(people: int, jobs_each: int) -> list[JobChange]:
        changes = []
        for _ in range(people):
            person = UserFactory(email="someone@example.com")
            jobs = [_by(person, fleet.submit(gpus=1)) for _ in range(jobs_each)]
            changes += [_change(job, Kind.STARTED) for job in jobs]
        return changes

    small, large = changes_for(1, 2), changes_for(8, 5)
    # jobs and submitters, preferences, one insert, unread counts (no mail for starts by default)
    with django_assert_num_queries(4), TestCase.captureOnCommitCallbacks(execute=True):
        assert job_notices_send(changes=small).notices == 1
    with django_assert_num_queries(4), TestCase.captureOnCommitCallbacks(execute=True):
        assert job_notices_send(changes=large).notices == 8


def test_a_large_cycle_links_the_first_fifty_jobs_and_points_to_the_rest(fleet: Fleet) -> None:
    lead = UserFactory(username="busy", email="busy@example.com")
    jobs = [_by(lead, fleet.submit(gpus=1, name=f"sweep-{i:02}")) for i in range(53)]

    job_notices_send(changes=[_change(job, Kind.EVICTED, "node-failed") for job in jobs])

    (notice,) = Notification.objects.filter(user=lead)
    assert notice.message.startswith("53 jobs requeued: sweep-00, sweep-01, sweep-02, sweep-03, sweep-04 and 48 more.")
    assert len(notice.jobs) == 50
    (only,) = job_notice_mails(items=[[lead.pk, job.pk, NoticeKind.JOB_FAILED, "lost"] for job in jobs])
    assert len(re.findall(r"http://localhost:8000/jobs/\d+/", only.body)) == 50
    assert "- and 3 more: http://localhost:8000/jobs/?user=busy" in only.body
