"""Job notices: once a tick has committed, each submitter hears of their jobs that started, were
preempted, were requeued (a node failed, lost a GPU, turned slow or was drained under them: they go
back to their checkpoint, they have not failed), failed or finished, in the app and by e-mail as
they chose for each kind. A notice says what happened and why, as the job's history does.

Batched, and never inside the tick's transaction: per tick one query for the changed jobs'
submitters, one for their preferences, one insert for every in-app notice (one summary per
user, "3 jobs started, 1 preempted", linking each job), one query for the unread counts, one
pass over the channel layer, and one Celery task for the mails, which the worker renders one per
user. The number of statements does not grow with the jobs or the people in a tick.

Submitters only: a team's leads follow the team's jobs live on the jobs list, and a notice for
every teammate's job would drown the ones about their own. Jobs with no submitter (serving
replicas, the demo's arrivals) tell nobody.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse

from core.live_events import live_event
from core.socket_events import user_events_publish
from core.tasks import enqueue, enqueue_on_commit
from scheduling.bulk_rows import by_ids
from scheduling.models import Job, SchedulerEvent
from scheduling.tick_outcome import JobChange
from tenants.models import NoticeKind, Notification
from tenants.selectors import notification_preferences_for_users, unread_notification_counts

# The order kinds are listed in, and the word each takes in a summary.
VERBS: dict[str, str] = {
    NoticeKind.JOB_STARTED: "started",
    NoticeKind.JOB_PREEMPTED: "preempted",
    NoticeKind.JOB_FAILED: "failed",
    NoticeKind.JOB_FINISHED: "finished",
}
# A job a node failure (or a slow or drained node) moved is not a failed one: it was requeued from
# its checkpoint. Its notice is of the kind its submitter chose for node failures, in this word.
REQUEUED = "requeued"
RESTARTED = "restarted"
# The order the words are listed in within a summary.
WORDS = ("started", RESTARTED, "preempted", REQUEUED, "failed", "finished")
NAMES_SHOWN = 5  # in a notice's text
JOBS_LINKED = 50  # in a notice's list and a mail; the rest are on the submitter's jobs list


def _preempted(cause: str) -> bool:
    return cause.startswith("preempted")


def job_notice_kind(change: JobChange) -> str | None:
    """What a job's change in a tick tells its submitter, if anything, by the kind of notice they
    chose to hear of. A node that failed, degraded, turned slow or was drained under the job
    (which was requeued from its checkpoint) is of the "failed" kind, as are its time limit and
    its command failing on a real cluster; a
    job evicted and started again in one tick is of the kind of its eviction."""
    if change.event == SchedulerEvent.Kind.STARTED:
        if change.evicted:
            return NoticeKind.JOB_PREEMPTED if _preempted(change.cause) else NoticeKind.JOB_FAILED
        return NoticeKind.JOB_STARTED
    if change.event == SchedulerEvent.Kind.COMPLETED:
        return NoticeKind.JOB_FINISHED
    if change.event in (SchedulerEvent.Kind.TIMED_OUT, SchedulerEvent.Kind.FAILED):
        return NoticeKind.JOB_FAILED
    if change.event == SchedulerEvent.Kind.EVICTED:
        return NoticeKind.JOB_PREEMPTED if _preempted(change.cause) else NoticeKind.JOB_FAILED
    return None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def job_notice_words(change: JobChange) -> tuple[str, str]:
    """The word a summary counts the change under ("requeued"), and what it says of one job
    ("was evicted by node failure on node r1-n1, requeued from its last checkpoint at step 12 …")."""
    if change.event == SchedulerEvent.Kind.STARTED and change.evicted:
        return RESTARTED, f"was {_lower_first(change.evicted)}; it restarted at once"
    if change.event == SchedulerEvent.Kind.EVICTED:
        word = "preempted" if _preempted(change.cause) else REQUEUED
        return word, f"was {_lower_first(change.message)}"
    kind = job_notice_kind(change)
    word = VERBS[kind] if kind else ""
    return word, word


@dataclass(frozen=True, slots=True)
class JobNotice:
    """One job's event for its submitter: `kind` is the preference it is sent by, `word` what a
    summary counts it under, `says` what a notice about this job alone says of it."""

    user_id: int
    username: str
    job_id: int
    name: str
    kind: str
    message: str
    word: str = ""
    says: str = ""

    @property
    def verb(self) -> str:
        return self.word or VERBS[self.kind]


@dataclass(frozen=True, slots=True)
class JobNoticesSent:
    notices: int  # in-app summaries written
    mailed_users: int  # users a mail was queued for


def job_notices_send(*, changes: Iterable[JobChange]) -> JobNoticesSent:
    """Tell each submitter of the tick's changes, as they chose (see the module docstring).
    Call it after the tick commits."""
    by_user = _by_submitter(changes)
    if not by_user:
        return JobNoticesSent(notices=0, mailed_users=0)
    preferences = notification_preferences_for_users(user_ids=by_user)
    in_app: dict[int, list[JobNotice]] = {}
    by_mail: list[list[object]] = []
    for user_id, items in sorted(by_user.items()):
        wanted = preferences[user_id]
        shown = [item for item in items if wanted[item.kind].in_app]
        if shown:
            in_app[user_id] = shown
        by_mail += [
            [item.user_id, item.job_id, item.kind, item.message, item.verb] for item in items if wanted[item.kind].email
        ]
    notices = Notification.objects.bulk_create(_summary(user_id, items) for user_id, items in in_app.items())
    unread = unread_notification_counts(user_ids=in_app)
    user_events_publish(
        events=[
            (n.user_id, live_event("notice", message=n.message, url=n.url, unread=unread[n.user_id])) for n in notices
        ]
    )
    if by_mail:
        enqueue_on_commit("scheduling.tasks.job_notices_email", items=by_mail)
    return JobNoticesSent(notices=len(notices), mailed_users=len({row[0] for row in by_mail}))


def _by_submitter(changes: Iterable[JobChange]) -> dict[int, list[JobNotice]]:
    """Each submitter's job events, one query per thousand jobs; submitters with no e-mail
    address still get their notices in the app."""
    kinds = {
        change.job_id: (kind, change.message, *job_notice_words(change))
        for change in changes
        if (kind := job_notice_kind(change))
    }
    ids = sorted(kinds)
    by_user: dict[int, list[JobNotice]] = defaultdict(list)
    active = Job.objects.filter(submitted_by__is_active=True).order_by("pk")
    for chunk in by_ids(active.values_list("pk", "name", "submitted_by_id", "submitted_by__username"), ids):
        for job_id, name, user_id, username in chunk:
            kind, message, word, says = kinds[job_id]
            by_user[user_id].append(JobNotice(user_id, username, job_id, name, kind, message, word, says))
    return by_user


def job_notices_summary(items: Sequence[JobNotice]) -> str:
    """ "train-a started" for one job; "3 jobs started, 1 requeued" for several."""
    if len(items) == 1:
        return f"Your job {items[0].name} {items[0].verb}"
    counts = {word: sum(1 for item in items if item.verb == word) for word in WORDS}
    parts = [f"{n} {word}" for word, n in counts.items() if n]
    first_count = parts[0].split(" ", 1)[0]
    parts[0] = f"{first_count} {'job' if first_count == '1' else 'jobs'} {parts[0].split(' ', 1)[1]}"
    return ", ".join(parts)


def _in_order(items: Iterable[JobNotice]) -> list[JobNotice]:
    """Started, restarted, preempted, requeued, failed, finished; by job number within each."""
    return sorted(items, key=lambda item: (WORDS.index(item.verb), item.job_id))


def _summary(user_id: int, items: list[JobNotice]) -> Notification:
    ordered = _in_order(items)
    summary = job_notices_summary(ordered)
    if len(ordered) == 1:
        only = ordered[0]
        message = f"Your job {only.name} {only.says}." if only.says else f"{summary}."
        url = reverse("job-detail", kwargs={"job_id": ordered[0].job_id})
    else:
        names = ", ".join(item.name for item in ordered[:NAMES_SHOWN])
        more = f" and {len(ordered) - NAMES_SHOWN} more" if len(ordered) > NAMES_SHOWN else ""
        message = f"{summary}: {names}{more}."
        url = f"{reverse('job-list')}?{urlencode({'user': ordered[0].username})}"
    return Notification(
        user_id=user_id,
        kind=ordered[0].kind if len({item.kind for item in ordered}) == 1 else "",
        message=message[:300],
        url=url,
        jobs=[{"id": item.job_id, "name": item.name, "kind": item.kind} for item in ordered[:JOBS_LINKED]],
    )


# The worker's half: one mail per user -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobNoticeMail:
    to: str
    subject: str
    body: str


def job_notice_mails(*, items: Sequence[Sequence[object]]) -> list[JobNoticeMail]:
    """One mail per user for a tick's ``[user_id, job_id, kind, message, word]`` rows (rows queued
    before the word was sent take their kind's), each job linked."""
    by_user: dict[int, list[tuple[int, str, str, str]]] = defaultdict(list)
    for user_id, job_id, kind, message, *word in items:
        if str(kind) in VERBS:
            said = str(word[0]) if word and str(word[0]) in WORDS else VERBS[str(kind)]
            by_user[int(str(user_id))].append((int(str(job_id)), str(kind), str(message), said))
    job_ids = {row[0] for rows in by_user.values() for row in rows}
    names = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "name"))
    people = User.objects.filter(pk__in=by_user, is_active=True).exclude(email="").order_by("pk")
    site = settings.FLEETLINE_SITE_URL
    mails = []
    for person in people:
        ordered = _in_order(
            JobNotice(person.pk, person.username, job_id, names[job_id], kind, message, word)
            for job_id, kind, message, word in by_user[person.pk]
            if job_id in names
        )
        if not ordered:
            continue
        lines = [
            f"- {item.name} (#{item.job_id}) {item.verb}: {item.message}\n  {site}/jobs/{item.job_id}/"
            for item in ordered[:JOBS_LINKED]
        ]
        if len(ordered) > JOBS_LINKED:
            query = urlencode({"user": person.username})
            lines.append(f"- and {len(ordered) - JOBS_LINKED} more: {site}{reverse('job-list')}?{query}")
        body = "\n".join(
            [
                f"Hello {person.get_short_name() or person.username},",
                "",
                "In the fleet's last scheduling cycle:",
                *lines,
                "",
                f"Choose what you are told, in the app and by e-mail: {site}/settings/notifications/",
            ]
        )
        mails.append(JobNoticeMail(to=person.email, subject=f"[Fleetline] {job_notices_summary(ordered)}", body=body))
    return mails


def job_notices_email_send(*, items: Sequence[Sequence[object]]) -> int:
    """Queue each user's mail on its own task, so a failing mail server retries one mail, not
    the tick's. Returns how many were queued."""
    mails = job_notice_mails(items=items)
    for mail in mails:
        enqueue("tenants.tasks.notification_email", to=[mail.to], subject=mail.subject, message=mail.body)
    return len(mails)
