"""The Celery application: configuration comes from Django settings (``CELERY_*``)."""

from __future__ import annotations

import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("fleetline")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _logging_from_settings(**kwargs: Any) -> None:
    """Workers and beat log as every other process does (settings.LOGGING, LOG_LEVEL): left to
    itself, Celery resets the root logger to its own --loglevel, WARNING by default."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
