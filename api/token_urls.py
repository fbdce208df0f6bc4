from __future__ import annotations

from django.urls import path

from api import token_views

urlpatterns = [
    path("", token_views.token_list_view, name="api-tokens"),
    path("<str:token_key>/revoke/", token_views.token_revoke_view, name="api-token-revoke"),
]
