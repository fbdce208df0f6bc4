"""The job answers' direct rendering (``JobOutput.to_representation``) gives exactly what DRF's
walk over the declared fields gives, which is what the schema documents."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from api.views.jobs import JobDetailOutput, JobOutput
from scheduling.listed import listed_by_id, listed_from
from scheduling.live.waits import JobWait
from scheduling.models import Job
from scheduling.selectors import jobs_for_user
from tests.api.conftest import People


def _declared(output: serializers.Serializer, job: Job) -> Any:
    return serializers.Serializer.to_representation(output, job)


def test_direct_rendering_matches_the_declared_fields(people: People) -> None:
    fleet = people.fleet
    running = fleet.submit(gpus=8, name="runs", checkpoint_interval_s=600.0, time_limit_s=7200.0)
    fleet.submit(gpus=4, name="elastic", min_gpus=2, max_gpus=8, required_level="rack", checkpoint_gb=1.5)
    fleet.tick()
    fleet.submit(gpus=32, name="waits")
    Job.objects.filter(pk=running.pk).update(submitted_by=people.member, restarts=2)
    jobs = list(jobs_for_user(user=people.admin).select_related("submitted_by").order_by("id"))
    assert {job.state for job in jobs} >= {Job.State.RUNNING, Job.State.PENDING}
    context = {"pending": {job.pk: JobWait("capacity", 1234.0, None) for job in jobs}}
    for output_class in (JobOutput, JobDetailOutput):
        for job in jobs:
            output = output_class(context=context)
            direct = output.to_representation(job)
            assert direct == _declared(output, job)
            assert list(direct) == list(output.fields)
            assert [type(value) for value in direct.values()] == [
                type(value) for value in _declared(output, job).values()
            ]
    running_output = JobDetailOutput(context=context).to_representation(jobs[0])
    assert running_output["nodes"] and running_output["submitted_by"] == "member"
    assert any(JobOutput(context=context).to_representation(job)["pending"] for job in jobs)


def test_the_lean_rows_of_the_list_render_as_the_jobs_themselves(people: People) -> None:
    fleet = people.fleet
    running = fleet.submit(gpus=8, name="runs", checkpoint_interval_s=600.0, time_limit_s=7200.0)
    fleet.submit(gpus=4, name="elastic", min_gpus=2, max_gpus=8, preferred_level="rack", checkpoint_gb=1.5)
    fleet.tick()
    fleet.submit(gpus=32, name="waits")
    Job.objects.filter(pk=running.pk).update(submitted_by=people.member, restarts=2, exit_code=3, command="echo hi")
    jobs = jobs_for_user(user=people.admin).select_related("submitted_by").order_by("id")
    context = {"pending": {job.pk: JobWait("capacity", 1234.0, None) for job in jobs}}

    lean = listed_by_id([job.pk for job in jobs])

    assert [row.pk for row in lean] == [job.pk for job in jobs]
    assert lean == [listed_from(job) for job in jobs]
    output = JobOutput(context=context)
    assert [output.to_representation(row) for row in lean] == [output.to_representation(job) for job in jobs]
