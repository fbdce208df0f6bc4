from __future__ import annotations

from django.urls import path

from simulations import views

app_name = "simulations"

urlpatterns = [
    path("simulations/", views.simulation_list, name="list"),
    path("simulations/<int:simulation_id>/", views.simulation_detail, name="detail"),
    path("simulations/<int:simulation_id>/progress/", views.simulation_progress, name="progress"),
    path("simulations/<int:simulation_id>/cancel/", views.simulation_cancel_view, name="cancel"),
    path("simulations/<int:simulation_id>/report/", views.simulation_report, name="report"),
]
