from __future__ import annotations

from django.urls import path

from tenants.views import admin_portal, notifications, quotas, teams

app_name = "tenants"

urlpatterns = [
    path("teams/", teams.team_list, name="team_list"),
    path("teams/<slug:slug>/", teams.team_detail, name="team_detail"),
    path("teams/<slug:slug>/members/", teams.team_member_add, name="team_member_add"),
    path("teams/<slug:slug>/quotas/<str:accelerator>/", quotas.quota_set, name="quota_set"),
    path("teams/<slug:slug>/members/<int:pk>/remove/", teams.team_member_remove, name="team_member_remove"),
    path(
        "teams/<slug:slug>/quota-requests/<int:pk>/withdraw/",
        teams.quota_request_withdraw,
        name="quota_request_withdraw",
    ),
    path("admin-portal/quota-requests/", admin_portal.quota_queue, name="quota_queue"),
    path(
        "admin-portal/quota-requests/<int:pk>/approve/",
        admin_portal.quota_request_decide,
        {"decision": "approve"},
        name="quota_request_approve",
    ),
    path(
        "admin-portal/quota-requests/<int:pk>/reject/",
        admin_portal.quota_request_decide,
        {"decision": "reject"},
        name="quota_request_reject",
    ),
    path("admin-portal/policy/", admin_portal.policy, name="policy"),
    path("admin-portal/policy/classes/new/", admin_portal.priority_class_edit, name="priority_class_add"),
    path("admin-portal/policy/classes/<int:pk>/", admin_portal.priority_class_edit, name="priority_class_edit"),
    path("admin-portal/audit/", admin_portal.audit_log, name="audit_log"),
    path("notifications/", notifications.notification_list, name="notifications"),
    path("notifications/read/", notifications.notification_read, name="notification_read"),
    path("settings/notifications/", notifications.notification_settings, name="notification_settings"),
]
