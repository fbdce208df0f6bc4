"""Closed months, rates and budgets: what changes, what never does, who may, and bad input."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from functools import partial

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client, TestCase

from finance.models import Budget, BudgetAlert, MonthClose, Rate
from finance.selectors import finance_report
from finance.services import budget_set, budgets_check, month_close, month_reopen, month_report_mail_send, rate_set
from scheduling.models import JobUsage
from tenants.models import AuditEvent, Notification
from tests.finance.ledger import Books, books_build

JANUARY = {"first": date(2026, 1, 1), "last": date(2026, 1, 31)}


@pytest.fixture
def books(db: None) -> Books:
    return books_build()


def _close_january(books: Books) -> MonthClose:
    with TestCase.captureOnCommitCallbacks(execute=False):
        return month_close(actor=books.finance, year=2026, month=1)


def test_a_closed_month_does_not_change_when_rates_or_the_ledger_change(books: Books) -> None:
    before = finance_report(user=books.finance, **JANUARY)
    _close_january(books)

    Rate.objects.filter(accelerator_type=books.h100).update(price_per_gpu_hour=Decimal("9.99"))
    JobUsage.objects.filter(job=books.jobs[0]).update(allocated_gpu_s=0.0)

    after = finance_report(user=books.finance, **JANUARY)
    assert [(r.team, r.used_gpu_h, r.cost) for r in after.rows] == [(r.team, r.used_gpu_h, r.cost) for r in before.rows]
    assert after.closed is not None and after.closed.closed_by == "fiona"
    assert after.totals.cost == Decimal("520.00")


def test_a_lead_sees_only_their_teams_of_a_closed_month(books: Books) -> None:
    _close_january(books)

    report = finance_report(user=books.lead, **JANUARY)

    assert [row.team for row in report.rows] == ["Vision"]
    assert report.fleet is None


def test_closing_is_audited_and_mails_the_report_to_finance(books: Books) -> None:
    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        close = month_close(actor=books.finance, year=2026, month=1)

    assert len(callbacks) == 1  # the mail goes from a worker, after commit
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.MONTH_CLOSED, object_repr="January 2026").exists()
    assert month_report_mail_send(close_id=close.pk) == 1
    (sent,) = mail.outbox
    assert sent.to == ["fiona@example.com"]
    assert "January 2026" in sent.subject
    assert sent.attachments[0][0] == "fleetline-chargeback-2026-01.xlsx"


def test_a_month_closes_once_and_only_after_it_ends(books: Books) -> None:
    _close_january(books)

    with pytest.raises(ValidationError, match="already closed"):
        month_close(actor=books.admin, year=2026, month=1)
    with pytest.raises(ValidationError, match="has not ended"):
        month_close(actor=books.finance, year=2026, month=2)  # the fleet calendar is at 10 February
    assert MonthClose.objects.count() == 1


@pytest.mark.parametrize("who", ["lead", "member", "outsider"])
def test_only_finance_and_admins_close_months(books: Books, who: str) -> None:
    with pytest.raises(PermissionDenied):
        month_close(actor=getattr(books, who), year=2026, month=1)
    assert not MonthClose.objects.exists()


def test_a_rate_change_inside_a_closed_month_is_refused_and_changes_nothing(books: Books) -> None:
    _close_january(books)
    rates = list(Rate.objects.values_list("accelerator_type_id", "price_per_gpu_hour", "effective_from"))

    with pytest.raises(ValidationError, match="January 2026 is closed"):
        rate_set(
            actor=books.admin,
            accelerator_type_id=books.h100.pk,
            price_per_gpu_hour=Decimal("4"),
            effective_from=date(2026, 1, 20),
        )
    # A rate from before the closed month would reprice it too (until the next rate of that type).
    with pytest.raises(ValidationError, match="January 2026 is closed"):
        rate_set(
            actor=books.admin,
            accelerator_type_id=books.a100.pk,
            price_per_gpu_hour=Decimal("4"),
            effective_from=date(2025, 12, 20),
        )

    assert list(Rate.objects.values_list("accelerator_type_id", "price_per_gpu_hour", "effective_from")) == rates
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.RATE_SET).exists()


def test_a_rate_after_the_closed_month_is_kept_with_its_history_and_audited(books: Books) -> None:
    _close_january(books)

    rate_set(
        actor=books.admin,
        accelerator_type_id=books.h100.pk,
        price_per_gpu_hour=Decimal("4"),
        effective_from=date(2026, 2, 1),
    )

    assert list(Rate.objects.filter(accelerator_type=books.h100).values_list("price_per_gpu_hour", flat=True)) == [
        Decimal("2.0000"),
        Decimal("3.0000"),
        Decimal("4.0000"),
    ]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.RATE_SET)
    assert event.actor == books.admin and event.after["price_per_gpu_hour"] == "4"


@pytest.mark.parametrize("price", [Decimal("-0.01"), Decimal("10000000")])
def test_a_negative_or_absurd_rate_is_refused(books: Books, price: Decimal) -> None:
    with pytest.raises(ValidationError):
        rate_set(
            actor=books.admin,
            accelerator_type_id=books.h100.pk,
            price_per_gpu_hour=price,
            effective_from=date(2026, 3, 1),
        )
    assert Rate.objects.count() == 3


def test_only_admins_set_rates(books: Books) -> None:
    with pytest.raises(PermissionDenied):
        rate_set(
            actor=books.finance,
            accelerator_type_id=books.h100.pk,
            price_per_gpu_hour=Decimal("1"),
            effective_from=date(2026, 3, 1),
        )


def test_the_rates_page_refuses_a_negative_rate_with_a_message(books: Books) -> None:
    client = Client()
    client.force_login(books.admin)

    response = client.post(
        "/finance/rates/",
        {"accelerator_type": books.h100.pk, "price_per_gpu_hour": "-1", "effective_from": "2026-03-01"},
    )

    assert response.status_code == 400
    assert "A rate cannot be negative." in response.content.decode()
    assert Rate.objects.count() == 3


def test_reopening_takes_an_admin_and_a_reason_and_is_audited(books: Books) -> None:
    _close_january(books)

    with pytest.raises(PermissionDenied):
        month_reopen(actor=books.finance, year=2026, month=1, reason="late invoice")
    with pytest.raises(ValidationError, match="Say why"):
        month_reopen(actor=books.admin, year=2026, month=1, reason=" ")
    month_reopen(actor=books.admin, year=2026, month=1, reason="A late correction from the provider")

    close = MonthClose.objects.get()
    assert close.reopened_by == books.admin and close.reopen_reason == "A late correction from the provider"
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.MONTH_REOPENED)
    assert event.after == {"reason": "A late correction from the provider"}
    # Open again: the live ledger answers, and the month can be closed anew.
    assert finance_report(user=books.finance, **JANUARY).closed is None
    _close_january(books)
    assert MonthClose.objects.count() == 2


def test_a_budget_notifies_the_lead_and_finance_once_at_80_and_once_at_100_percent(books: Books) -> None:
    # The fleet calendar is in February: give February some spend on the ledger.
    JobUsage.objects.filter(job=books.jobs[0], day=date(2026, 1, 10)).update(day=date(2026, 2, 3))  # 80 GPU-h, 240.00
    budget_set(actor=books.finance, team_id=books.vision.pk, unit=Budget.Unit.MONEY, monthly_amount=Decimal("290"))

    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        first = budgets_check()
        again = budgets_check()
    mails = [c for c in callbacks if isinstance(c, partial) and "subject" in c.keywords]

    assert [(a.team, a.threshold_percent) for a in first] == [(books.vision, 80)]
    assert again == []
    told = set(Notification.objects.values_list("user__username", flat=True))
    assert told == {"lena", "fiona"}
    assert len(mails) == 2  # one mail each, queued for a worker after commit
    assert mails[0].keywords["subject"] == "Fleetline budget: Vision at 80 %"

    JobUsage.objects.filter(job=books.jobs[0], day=date(2026, 2, 3)).update(allocated_gpu_s=100 * 3600.0)  # 300.00
    with TestCase.captureOnCommitCallbacks(execute=False):
        assert [a.threshold_percent for a in budgets_check()] == [100]
        assert budgets_check() == []
    assert BudgetAlert.objects.count() == 2
    assert Notification.objects.count() == 4


def test_a_jump_past_both_thresholds_sends_only_the_100_percent_alert(books: Books) -> None:
    JobUsage.objects.filter(job=books.jobs[0], day=date(2026, 1, 10)).update(day=date(2026, 2, 3))  # 240.00
    budget_set(actor=books.finance, team_id=books.vision.pk, unit=Budget.Unit.MONEY, monthly_amount=Decimal("200"))

    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        recorded = budgets_check()
        assert budgets_check() == []
    mails = [c for c in callbacks if isinstance(c, partial) and "subject" in c.keywords]

    assert sorted(a.threshold_percent for a in recorded) == [80, 100]  # both kept, so 80 % never comes later
    assert sorted(Notification.objects.values_list("user__username", flat=True)) == ["fiona", "lena"]
    assert all("past 100 %" in n.message for n in Notification.objects.all())
    assert [m.keywords["subject"] for m in mails] == ["Fleetline budget: Vision at 100 %"] * 2


def test_a_budget_alert_links_each_person_to_a_page_they_can_open(books: Books) -> None:
    JobUsage.objects.filter(job=books.jobs[0], day=date(2026, 1, 10)).update(day=date(2026, 2, 3))  # 240.00
    budget_set(actor=books.finance, team_id=books.vision.pk, unit=Budget.Unit.MONEY, monthly_amount=Decimal("290"))
    with TestCase.captureOnCommitCallbacks(execute=False):
        budgets_check()

    for person in (books.finance, books.lead):
        notice = Notification.objects.get(user=person)
        client = Client()
        client.force_login(person)
        page = client.get(notice.url.partition("#")[0])
        assert page.status_code == 200, (person.username, notice.url)
        anchor = notice.url.partition("#")[2]
        assert f'id="{anchor}"' in page.content.decode()
    assert Notification.objects.get(user=books.finance).url == "/finance/budgets/#budget-vision"
    finance = Client()
    finance.force_login(books.finance)
    assert "240.00 (83 %)" in finance.get("/finance/budgets/").content.decode()  # this month's spend, on its row


def test_finance_reads_rates_and_is_told_only_admins_set_them(books: Books) -> None:
    finance, admin = Client(), Client()
    finance.force_login(books.finance)
    admin.force_login(books.admin)

    page = finance.get("/finance/rates/").content.decode()
    assert "Only fleet admins set rates" in page and 'id="rate-form"' not in page
    admin_page = admin.get("/finance/rates/").content.decode()
    assert "Only fleet admins set rates" not in admin_page and 'id="rate-form"' in admin_page


def test_a_negative_budget_or_unknown_team_is_refused(books: Books) -> None:
    with pytest.raises(ValidationError):
        budget_set(actor=books.finance, team_id=books.vision.pk, unit="money", monthly_amount=Decimal("-5"))
    with pytest.raises(ValidationError, match="No such team"):
        budget_set(actor=books.finance, team_id=999999, unit="money", monthly_amount=Decimal("5"))
    with pytest.raises(PermissionDenied):
        budget_set(actor=books.lead, team_id=books.vision.pk, unit="money", monthly_amount=Decimal("5"))
    assert not Budget.objects.exists()


def test_the_months_page_closes_a_month_for_finance(books: Books) -> None:
    client = Client()
    client.force_login(books.finance)

    with TestCase.captureOnCommitCallbacks(execute=False):
        response = client.post("/finance/months/close/", {"month": "2026-01"})

    assert response.status_code == 302 and response["Location"] == "/reports/usage/?month=2026-01"
    page = client.get("/reports/usage/", {"month": "2026-01"})
    assert "these figures are the month as closed" in page.content.decode()
