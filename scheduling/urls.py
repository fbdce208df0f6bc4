from __future__ import annotations

from django.urls import path

from scheduling import views

urlpatterns = [
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/new/", views.job_submit_view, name="job-submit"),
    path("jobs/new/estimate/", views.job_submit_estimate, name="job-submit-estimate"),
    path("jobs/<int:job_id>/", views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/live/", views.job_live, name="job-live"),
    path("jobs/<int:job_id>/cancel/", views.job_cancel_view, name="job-cancel"),
    path("fleet/", views.fleet_map_view, name="fleet-map"),
    path("fleet/node-action/", views.node_action_view, name="node-action"),
    path("incidents/", views.incident_list, name="incident-list"),
]
