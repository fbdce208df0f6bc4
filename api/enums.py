"""Choice sets named once for the OpenAPI schema (``SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]``),
so that two fields called ``state`` get two clear enum names."""

from __future__ import annotations

from scheduling.models import Incident, Job, Node, SchedulerEvent
from tenants.models import QuotaRequest

JOB_STATES = Job.State.choices
NODE_STATES = Node.State.choices
INCIDENT_KINDS = Incident.Kind.choices
SCHEDULER_EVENT_KINDS = SchedulerEvent.Kind.choices
QUOTA_REQUEST_STATES = QuotaRequest.State.choices
