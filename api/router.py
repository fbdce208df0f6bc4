"""The v1 router. ``api/urls.py`` registers every resource on it: the API builds on the apps, and
no app imports the API back."""

from __future__ import annotations

from rest_framework.routers import DefaultRouter

router = DefaultRouter()
