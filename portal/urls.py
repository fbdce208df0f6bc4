from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from api.views.retired import RetiredJobsApi
from portal import oidc, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("reports/usage/", views.usage_report_view, name="usage-report"),
    path("login/", oidc.LoginView.as_view(), name="login"),
    path("oidc/authenticate/", oidc.OidcAuthenticateView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", oidc.OidcCallbackView.as_view(), name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    # The routes before v1, retired: 410 Gone, pointing to v1.
    re_path(r"^api/jobs(?:/(?P<rest>.*))?$", RetiredJobsApi.as_view(), name="api-jobs-retired"),
    path("settings/tokens/", include("api.token_urls")),
    path("", include("observability.urls")),
    path("", include("simulations.urls")),
    path("", include("finance.urls")),
    path("", include("tenants.urls")),
    path("", include("scheduling.urls")),
]
