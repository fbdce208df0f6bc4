from __future__ import annotations

from django.urls import path

from finance import views

app_name = "finance"

urlpatterns = [
    path("finance/rates/", views.rates, name="rates"),
    path("finance/budgets/", views.budgets, name="budgets"),
    path("finance/months/", views.months, name="months"),
    path("finance/months/close/", views.month_close, name="month_close"),
    path("finance/months/reopen/", views.month_reopen, name="month_reopen"),
    path("finance/jobs/", views.jobs, name="jobs"),
    path("finance/exports/<int:pk>/", views.export, name="export"),
]
