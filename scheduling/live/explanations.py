"""A pending job's wait in people's words: the one thing that holds it (`engine.plan.Blocker`)
with its team's, the job ahead's and the node's or rack's names, the job ahead linked to its
page; what a job without an estimate waits for, named the same way. Internal ids never show
where a name is known.

`wait_names_for` finds the names a tick's blockers name (three queries at most, however long the
queue); `wait_html` and `wait_text` say a `JobWait` with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from scheduling.engine.blockers import blocker_text
from scheduling.engine.explain import ESTIMATE_HORIZON_S
from scheduling.engine.plan import WAITS_JOB, WAITS_QUOTA, WAITS_QUOTA_LIMIT, Blocker, PendingStatus
from scheduling.engine.vocabulary import reason_text, waits_text
from scheduling.live.waits import JobWait, WaitNames
from scheduling.models import Job, Node
from tenants.models import Team

_TEAM_WAITS = (WAITS_QUOTA, WAITS_QUOTA_LIMIT)


def wait_names_for(*, statuses: Iterable[PendingStatus], blockers: Mapping[str, Blocker]) -> WaitNames:
    """The names of the teams, jobs and nodes that `blockers` and the statuses' `waits_for` name,
    and the team of each job named."""
    teams: set[int] = set()
    jobs: set[int] = set()
    nodes: set[int] = set()
    for blocker in blockers.values():
        if blocker.team is not None:
            teams.add(int(blocker.team))
        if blocker.job_id is not None and blocker.job_id.isdigit():
            jobs.add(int(blocker.job_id))
        if blocker.level == "node" and blocker.domain is not None and blocker.domain.isdigit():
            nodes.add(int(blocker.domain))
    for status in statuses:
        waits_for = status.waits_for
        if waits_for and waits_for.startswith(_TEAM_WAITS):
            teams.add(int(waits_for.partition(":")[2]))
        elif waits_for and waits_for.startswith(WAITS_JOB):
            jobs.add(int(waits_for.removeprefix(WAITS_JOB)))
    named_jobs = list(Job.objects.filter(pk__in=jobs).values_list("pk", "name", "team_id")) if jobs else []
    teams.update(team for _, _, team in named_jobs)
    return WaitNames(
        teams={str(pk): name for pk, name in Team.objects.filter(pk__in=teams).values_list("pk", "name")}
        if teams
        else {},
        jobs={str(pk): name for pk, name, _ in named_jobs},
        nodes={str(pk): name for pk, name in Node.objects.filter(pk__in=nodes).values_list("pk", "name")}
        if nodes
        else {},
        job_teams={str(pk): str(team) for pk, _, team in named_jobs},
    )


def ahead_is_private(job_id: str, wait: JobWait) -> bool:
    """Whether the job ahead is another team's than the waiting job's: its name and page are not
    the waiting team's to see (as everywhere in Fleetline), so it is told by its team only."""
    ahead_team = wait.names.job_teams.get(job_id)
    return ahead_team is not None and ahead_team != wait.team


def _job_label(job_id: str, wait: JobWait) -> str:
    names = wait.names
    if ahead_is_private(job_id, wait):
        return f"a job of {names.teams.get(names.job_teams[job_id]) or 'another team'}"
    name = names.jobs.get(job_id)
    return f"job #{job_id}" if name is None else f"{name} (#{job_id})"


def _team_label(team_id: str | None, names: WaitNames) -> str:
    if team_id is None:
        return "its team"
    return names.teams.get(team_id) or "its team"


def _where(blocker: Blocker, names: WaitNames) -> str:
    level, domain = blocker.level, blocker.domain
    if domain is None:
        return "the fleet's whole nodes"
    if level == "node":
        return f"node {names.nodes.get(domain, domain)}"
    if level == "rack":
        pod, _, rack = domain.partition("/")
        return f"rack {rack} of pod {pod}"
    return f"pod {domain}"


def _said(wait: JobWait, job: str) -> str:
    blocker = wait.blocker
    if blocker is None:
        return reason_text(wait.reason)
    return blocker_text(blocker, team=_team_label(blocker.team, wait.names), job=job, where=_where(blocker, wait.names))


def wait_text(wait: JobWait) -> str:
    """Why the job waits, in plain words (the job ahead by name and number)."""
    blocker = wait.blocker
    return _said(wait, "" if blocker is None or blocker.job_id is None else _job_label(blocker.job_id, wait))


def wait_html(wait: JobWait) -> SafeString:
    """Why the job waits, for a page: every name escaped, the job ahead a link to its page."""
    blocker = wait.blocker
    if (
        blocker is None
        or blocker.job_id is None
        or not blocker.job_id.isdigit()
        or ahead_is_private(blocker.job_id, wait)
    ):
        return format_html("{}", wait_text(wait))
    marker = "\x00job\x00"  # where the link goes: no name or number contains it
    before, _, after = _said(wait, marker).partition(marker)
    link = format_html(
        '<a href="{}" class="blocker-job">{}</a>',
        reverse("job-detail", args=[int(blocker.job_id)]),
        _job_label(blocker.job_id, wait),
    )
    return format_html("{}{}{}", before, link, after)


def waits_for_text(wait: JobWait) -> str:
    """What a job without a believable estimate waits for, its team or job by name."""
    waits_for = wait.waits_for
    who = None
    if waits_for and waits_for.startswith(_TEAM_WAITS):
        who = _team_label(waits_for.partition(":")[2], wait.names)
    elif waits_for and waits_for.startswith(WAITS_JOB):
        who = _job_label(waits_for.removeprefix(WAITS_JOB), wait)
    return waits_text(waits_for, horizon_s=ESTIMATE_HORIZON_S, who=who)
