"""Services queue Celery tasks by name through `core.tasks`: the task runs as ``.delay`` runs it,
after the transaction commits and never when it rolls back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core import mail
from django.db import transaction
from django.test import TestCase

from core.tasks import enqueue, enqueue_on_commit
from portal.celery import app as celery_app

pytestmark = pytest.mark.django_db

NOTICE_MAIL = "tenants.tasks.notification_email"


@pytest.fixture(autouse=True)
def tasks_inline() -> Iterator[None]:
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = eager


def test_a_task_queued_on_commit_runs_once_the_transaction_commits() -> None:
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue_on_commit(NOTICE_MAIL, to=["ada@example.com"], subject="Quota", message="Changed.")
        assert mail.outbox == []

    assert [(m.to, m.subject) for m in mail.outbox] == [(["ada@example.com"], "Quota")]


def test_a_task_queued_in_a_rolled_back_transaction_never_runs() -> None:
    with TestCase.captureOnCommitCallbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue_on_commit(NOTICE_MAIL, to=["ada@example.com"], subject="Quota", message="Changed.")
            raise RuntimeError("the change fails")

    assert callbacks == [] and mail.outbox == []


def test_an_unknown_task_name_is_refused() -> None:
    with pytest.raises(KeyError):
        enqueue("tenants.tasks.no_such_task")
    with pytest.raises(ModuleNotFoundError):
        enqueue("nowhere.tasks.notification_email")
