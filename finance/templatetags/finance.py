"""The team page's budget block: spend this fleet month against the team's budget, for the
team's leads, finance and fleet admins (members see no money)."""

from __future__ import annotations

from typing import Any

from django import template

from finance.models import Budget
from finance.selectors import team_budget_status
from scheduling.fleet_calendar import fleet_today
from tenants.models import Membership, Team
from tenants.permissions import is_finance, is_fleet_admin, team_role

register = template.Library()


@register.inclusion_tag("finance/_team_budget.html", takes_context=True)
def team_budget(context: dict[str, Any], team: Team) -> dict[str, Any]:
    user = context["request"].user
    allowed = is_finance(user) or is_fleet_admin(user) or team_role(user, team) == Membership.Role.LEAD
    if not allowed:
        return {"allowed": False}
    if not Budget.objects.filter(team=team).exists():
        return {"allowed": True, "status": None, "month": None}
    month = fleet_today().replace(day=1)
    return {"allowed": True, "status": team_budget_status(team=team, month_first=month), "month": month}
