"""Finance's writes: rates, budgets, month close and reopen, budget alerts, background exports.
Each checks who may do it and what it would change before writing anything, writes in one
transaction with its audit entry, and starts any mail or worker task only after commit."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.tasks import enqueue_on_commit
from finance.models import Budget, BudgetAlert, MonthClose, Rate, ReportExport
from finance.selectors import BudgetStatus, ClosedInfo, budget_statuses, finance_report_build
from fleet.models import AcceleratorType
from scheduling.fleet_calendar import fleet_today, month_bounds
from tenants.models import AuditEvent, Membership, NoticeKind, Team
from tenants.permissions import is_finance, is_fleet_admin
from tenants.roles import FINANCE
from tenants.services.audit import audit_record
from tenants.services.notifications import notice_deliver

AnyUser = User | AnonymousUser
THRESHOLDS = (80, 100)
MAX_PRICE = Decimal("1000000")
MAX_BUDGET = Decimal("999999999999")


def _require_admin(actor: AnyUser) -> None:
    if not is_fleet_admin(actor):
        raise PermissionDenied("Only fleet admins may do this.")


def _require_finance_or_admin(actor: AnyUser) -> User:
    if not isinstance(actor, User) or not (is_finance(actor) or is_fleet_admin(actor)):
        raise PermissionDenied("Only finance and fleet admins may do this.")
    return actor


def _closed_months_overlapping(first: date, last: date | None) -> list[date]:
    months = MonthClose.objects.filter(reopened_at__isnull=True).values_list("month", flat=True)
    hit = []
    for month in months:
        month_last = month_bounds(month.year, month.month)[1]
        if month_last >= first and (last is None or month <= last):
            hit.append(month)
    return sorted(hit)


def rate_set(*, actor: AnyUser, accelerator_type_id: int, price_per_gpu_hour: Decimal, effective_from: date) -> Rate:
    """A new price per GPU-hour for an accelerator type from ``effective_from`` (fleet calendar).
    Refused when negative, absurd, or when it would reprice a day of a closed month."""
    _require_admin(actor)
    if price_per_gpu_hour < 0:
        raise ValidationError("A rate cannot be negative.")
    if price_per_gpu_hour > MAX_PRICE:
        raise ValidationError(f"A rate above {MAX_PRICE} per GPU-hour is not believable; check the figure.")
    accelerator = AcceleratorType.objects.filter(pk=accelerator_type_id).first()
    if accelerator is None:
        raise ValidationError("No such accelerator type.")
    following = (
        Rate.objects.filter(accelerator_type=accelerator, effective_from__gt=effective_from)
        .order_by("effective_from")
        .values_list("effective_from", flat=True)
        .first()
    )
    last_priced = None if following is None else following.fromordinal(following.toordinal() - 1)
    with transaction.atomic():
        closed = _closed_months_overlapping(effective_from, last_priced)
        if closed:
            raise ValidationError(
                f"{closed[0]:%B %Y} is closed: a rate from {effective_from:%Y-%m-%d} would change its charges. "
                "Choose a day after the last closed month, or ask an admin to reopen it."
            )
        before = Rate.objects.filter(accelerator_type=accelerator, effective_from=effective_from).first()
        if before is not None:
            old = {"price_per_gpu_hour": str(before.price_per_gpu_hour)}
            before.price_per_gpu_hour = price_per_gpu_hour
            before.created_by = actor if isinstance(actor, User) else None
            before.created_at = timezone.now()
            before.save()
            rate = before
        else:
            old = None
            rate = Rate.objects.create(
                accelerator_type=accelerator,
                price_per_gpu_hour=price_per_gpu_hour,
                effective_from=effective_from,
                created_by=actor if isinstance(actor, User) else None,
            )
        audit_record(
            actor=actor if isinstance(actor, User) else None,
            kind=AuditEvent.Kind.RATE_SET,
            object_repr=f"{accelerator.name} rate from {effective_from:%Y-%m-%d}",
            before=old,
            after={"price_per_gpu_hour": str(price_per_gpu_hour), "effective_from": effective_from.isoformat()},
        )
    return rate


def budget_set(*, actor: AnyUser, team_id: int, unit: str, monthly_amount: Decimal) -> Budget:
    _require_finance_or_admin(actor)
    if monthly_amount < 0:
        raise ValidationError("A budget cannot be negative.")
    if monthly_amount > MAX_BUDGET:
        raise ValidationError("That budget is too large to be real; check the figure.")
    if unit not in Budget.Unit.values:
        raise ValidationError("A budget is in money or in GPU-hours.")
    team = Team.objects.filter(pk=team_id).first()
    if team is None:
        raise ValidationError("No such team.")
    with transaction.atomic():
        before = Budget.objects.filter(team=team).first()
        old = None if before is None else {"unit": before.unit, "monthly_amount": str(before.monthly_amount)}
        budget, _ = Budget.objects.update_or_create(
            team=team,
            defaults={
                "unit": unit,
                "monthly_amount": monthly_amount,
                "updated_by": actor if isinstance(actor, User) else None,
                "updated_at": timezone.now(),
            },
        )
        audit_record(
            actor=actor if isinstance(actor, User) else None,
            kind=AuditEvent.Kind.BUDGET_SET,
            object_repr=f"{team.name} monthly budget",
            team=team,
            before=old,
            after={"unit": unit, "monthly_amount": str(monthly_amount)},
        )
    return budget


def month_close(*, actor: AnyUser, year: int, month: int) -> MonthClose:
    """Store the month's report as it stands and freeze it: later rate or ledger changes do not
    touch it. Only a month that has ended on the fleet calendar can be closed, once."""
    _require_finance_or_admin(actor)
    if not (1 <= month <= 12 and 1970 <= year <= 9998):
        raise ValidationError("No such month.")
    first, last = month_bounds(year, month)
    if last >= fleet_today():
        raise ValidationError(f"{first:%B %Y} has not ended on the fleet calendar yet; it can be closed after.")
    report = finance_report_build(first=first, last=last)
    who = actor.get_username() if isinstance(actor, User) else ""
    closed_at = timezone.now()
    report = type(report)(**{**report.__dict__, "closed": ClosedInfo(closed_at.isoformat(), who)})
    try:
        with transaction.atomic():
            close = MonthClose.objects.create(
                month=first,
                snapshot=report.to_json(),
                closed_by=actor if isinstance(actor, User) else None,
                closed_at=closed_at,
            )
            audit_record(
                actor=actor if isinstance(actor, User) else None,
                kind=AuditEvent.Kind.MONTH_CLOSED,
                object_repr=f"{first:%B %Y}",
                after={"total_cost": str(report.totals.cost), "teams": len(report.rows)},
            )
    except IntegrityError as exc:
        raise ValidationError(f"{first:%B %Y} is already closed.") from exc
    enqueue_on_commit("finance.tasks.month_report_mail", close_id=close.pk)
    return close


def month_reopen(*, actor: AnyUser, year: int, month: int, reason: str) -> MonthClose:
    _require_admin(actor)
    reason = reason.strip()
    if len(reason) < 5:
        raise ValidationError("Say why the month is reopened (a few words at least).")
    first = date(year, month, 1)
    with transaction.atomic():
        reopened = MonthClose.objects.filter(month=first, reopened_at__isnull=True).update(
            reopened_at=timezone.now(),
            reopened_by=actor if isinstance(actor, User) else None,
            reopen_reason=reason[:500],
        )
        if not reopened:
            raise ValidationError(f"{first:%B %Y} is not closed.")
        audit_record(
            actor=actor if isinstance(actor, User) else None,
            kind=AuditEvent.Kind.MONTH_REOPENED,
            object_repr=f"{first:%B %Y}",
            after={"reason": reason[:500]},
        )
    return MonthClose.objects.filter(month=first).order_by("-closed_at").first()  # type: ignore[return-value]


def _finance_and_leads(team: Team) -> list[tuple[User, str]]:
    """Who hears of a team's budget, each with the page that shows it to them: the team's leads
    the team page's budget, finance (who are not members, so the team page is not theirs) the
    budgets page at the team's row."""
    people = {
        u.pk: (u, f"/finance/budgets/#budget-{team.slug}")
        for u in User.objects.filter(groups__name=FINANCE, is_active=True)
    }
    for membership in Membership.objects.filter(team=team, role=Membership.Role.LEAD).select_related("user"):
        people[membership.user.pk] = (membership.user, f"/teams/{team.slug}/#team-budget")
    return list(people.values())


def budgets_check() -> list[BudgetAlert]:
    """Compare this fleet month's spend with each team's budget; at 80 % and at 100 % tell the
    team's leads and finance, once per threshold per month (the alert row is unique). A jump past
    both thresholds at once records both and tells once, of the higher."""
    month_first = fleet_today().replace(day=1)
    alerts = []
    for status in budget_statuses(month_first=month_first):
        crossed = [t for t in THRESHOLDS if status.budget > 0 and status.percent >= t]
        if not crossed:
            continue
        team = Team.objects.get(pk=status.team_id)
        with transaction.atomic():
            new = [alert for threshold in crossed if (alert := _alert_record(team, month_first, threshold, status))]
            if not new:
                continue  # told already this month
            threshold = new[-1].threshold_percent
            message = (
                f"{team.name} has spent {status.spend} of its {status.budget} {status.unit_label} "
                f"budget for {month_first:%B %Y} ({status.percent:.0f} %, past {threshold} %)."
            )
            for person, url in _finance_and_leads(team):
                notice_deliver(
                    user=person,
                    kind=NoticeKind.BUDGET,
                    message=message,
                    url=url,
                    subject=f"Fleetline budget: {team.name} at {threshold} %",
                )
        alerts += new
    return alerts


def _alert_record(team: Team, month_first: date, threshold: int, status: BudgetStatus) -> BudgetAlert | None:
    """The month's alert row at ``threshold``, or None when it was recorded already."""
    try:
        with transaction.atomic():
            return BudgetAlert.objects.create(
                team=team, month=month_first, threshold_percent=threshold, spend=status.spend, budget=status.budget
            )
    except IntegrityError:
        return None


def report_export_request(*, actor: AnyUser, first: date, last: date, file_format: str) -> ReportExport:
    """Queue a long period's export for a worker on the reports queue."""
    requester = _require_finance_or_admin(actor)
    if file_format not in ("csv", "xlsx"):
        raise ValidationError("Exports are CSV or XLSX.")
    export = ReportExport.objects.create(
        requested_by=requester, first_day=first, last_day=last, file_format=file_format
    )
    enqueue_on_commit("finance.tasks.report_export_build", export_id=export.pk)
    return export


def report_export_build(*, export_id: int) -> ReportExport | None:
    """The worker's half of ``report_export_request``: claim the export (a guarded update, so a
    redelivered task does not build it twice), build it, store it, with progress on the way."""
    from finance.exports import report_csv, report_xlsx

    if not ReportExport.objects.filter(pk=export_id, state=ReportExport.State.QUEUED).update(
        state=ReportExport.State.RUNNING
    ):
        return None
    export = ReportExport.objects.get(pk=export_id)
    try:
        # One build, so the file has exactly the page's figures (costs are rounded once per team).
        ReportExport.objects.filter(pk=export_id).update(progress_percent=10)
        report = finance_report_build(first=export.first_day, last=export.last_day)
        ReportExport.objects.filter(pk=export_id).update(progress_percent=80)
        content = report_csv(report) if export.file_format == "csv" else report_xlsx(report)
    except Exception as exc:
        ReportExport.objects.filter(pk=export_id).update(state=ReportExport.State.FAILED, error=str(exc)[:300])
        raise
    ReportExport.objects.filter(pk=export_id).update(
        state=ReportExport.State.DONE, progress_percent=100, content=content
    )
    return ReportExport.objects.get(pk=export_id)


def month_report_mail_send(*, close_id: int) -> int:
    """Mail a closed month's report (XLSX attached) to everyone in finance; returns how many."""
    from django.core.mail import EmailMessage

    from finance.exports import report_xlsx
    from finance.selectors import FinanceReport

    close = MonthClose.objects.get(pk=close_id)
    report = FinanceReport.from_json(close.snapshot)
    to = list(
        User.objects.filter(groups__name=FINANCE, is_active=True).exclude(email="").values_list("email", flat=True)
    )
    if not to:
        return 0
    total = report.totals
    message = EmailMessage(
        subject=f"Fleetline chargeback for {close.month:%B %Y} (closed)",
        body=(
            f"{close.month:%B %Y} is closed. {len(report.rows)} teams, {total.used_gpu_h:,.2f} GPU-hours used, "
            f"{total.cost:,.2f} {report.currency} charged ({report.charge_model_label}).\n"
            "The report as closed is attached; it does not change afterwards."
        ),
        to=to,
    )
    message.attach(
        f"fleetline-chargeback-{close.month:%Y-%m}.xlsx",
        report_xlsx(report),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    )
    message.send(fail_silently=False)
    return len(to)
