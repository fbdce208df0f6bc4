"""``/api/v1/``: every resource of the API is registered here; the apps it serves know nothing of it."""

from __future__ import annotations

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from api.router import router
from api.views import fleet, jobs, reports, simulations, tenants
from api.views.base import NoSuchEndpoint

app_name = "api-v1"

router.register("simulations", simulations.SimulationViewSet, basename="simulation")
router.register("jobs", jobs.JobViewSet, basename="job")
router.register("teams", tenants.TeamViewSet, basename="team")
router.register("quota-requests", tenants.QuotaRequestViewSet, basename="quota-request")
router.register("priority-classes", tenants.PriorityClassViewSet, basename="priority-class")
router.register("nodes", fleet.NodeViewSet, basename="node")
router.register("incidents", fleet.IncidentViewSet, basename="incident")

# The two API reference pages are third-party renderers (Swagger UI, Redoc) that style what they
# draw through inline styles: they, and only they, may use inline styles. Their scripts still come
# from this site only (Swagger UI's start-up script is served as a file of its own).
_inline_styles = csp_update({"style-src": [UNSAFE_INLINE]})
# Redoc searches in a web worker it starts from a blob: URL.
_redoc = csp_update({"style-src": [UNSAFE_INLINE], "worker-src": [SELF, "blob:"]})

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", _inline_styles(SpectacularSwaggerSplitView.as_view(url_name="api-v1:schema")), name="swagger"),
    path(
        "redoc/",
        _redoc(SpectacularRedocView.as_view(url_name="api-v1:schema", template_name="api/redoc.html")),
        name="redoc",
    ),
    path("policy/", tenants.PolicyView.as_view(), name="policy"),
    path("fleet/", fleet.FleetView.as_view(), name="fleet"),
    path("clock/", fleet.ClockView.as_view(), name="clock"),
    path("accelerators/", fleet.AcceleratorListView.as_view(), name="accelerators"),
    path("reports/usage/", reports.UsageReportView.as_view(), name="usage-report"),
    path("", include(router.urls)),
    # Last: whatever else ends in a slash is no endpoint (a path without one is first sent to
    # the same path with a slash, by APPEND_SLASH, as before); line breaks included, which "."
    # would not match.
    re_path(r"^[\s\S]*/$", NoSuchEndpoint.as_view(), name="no-such-endpoint"),
]
