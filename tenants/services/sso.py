"""Single sign-on: the account a verified identity provider login stands for, created at its first
login, and the roles and team memberships its groups grant under the operator's map
(`tenants.group_map`), brought up to date at every login through the services that own those
writes, so that their rules and audit entries are the same as an admin's changes."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from tenants.group_map import ROLE_GROUPS, TEAM_ROLES, GroupMap, MappedAccess
from tenants.models import AuditEvent, Membership, OidcIdentity, Team
from tenants.services.audit import audit_record
from tenants.services.memberships import membership_add, membership_remove, membership_role_change
from tenants.services.roles import role_set
from tenants.signals import access_revoked

logger = logging.getLogger(__name__)

SOURCE = "single sign-on"


class SsoLoginRefused(Exception):
    """The login is verified but stands for no account that may sign in; the message says why,
    for the person signing in."""


@dataclass(frozen=True, slots=True)
class SsoClaims:
    """What a verified login says about its person."""

    issuer: str
    subject: str
    username: str
    email: str
    groups: frozenset[str]


def _account_for(claims: SsoClaims, *, link_existing: bool) -> User:
    identity = OidcIdentity.objects.select_related("user").filter(issuer=claims.issuer, subject=claims.subject).first()
    if identity is not None:
        return identity.user
    user = User.objects.select_for_update().filter(username=claims.username).first()
    if user is None:
        user = User.objects.create_user(claims.username, email=claims.email)  # no usable password
        OidcIdentity.objects.create(user=user, issuer=claims.issuer, subject=claims.subject)
        audit_record(
            actor=None,
            kind=AuditEvent.Kind.SSO_ACCOUNT_CREATED,
            object_repr=claims.username,
            after={"user": claims.username, "email": claims.email},
            source=SOURCE,
        )
        return user
    if not link_existing or OidcIdentity.objects.filter(user=user).exists():
        # Taking over an account by naming it at the identity provider must not be possible.
        raise SsoLoginRefused(
            f"Fleetline already has an account named {claims.username} that is not linked to this "
            "sign-on. An administrator can link it; until then, log in with its password."
        )
    OidcIdentity.objects.create(user=user, issuer=claims.issuer, subject=claims.subject)
    audit_record(
        actor=None,
        kind=AuditEvent.Kind.SSO_ACCOUNT_LINKED,
        object_repr=claims.username,
        after={"user": claims.username},
        source=SOURCE,
    )
    return user


def _roles_sync(user: User, access: MappedAccess) -> bool:
    """The mapped roles as the groups grant them; True when one was taken away."""
    revoked = False
    for name, held in access.roles.items():
        changed = role_set(actor=None, user=user, role=ROLE_GROUPS[name], held=held, source=SOURCE)
        revoked = revoked or (changed and not held)
    return revoked


def _teams_sync(user: User, access: MappedAccess) -> bool:
    """The mapped teams' memberships as the groups grant them; True when one was taken away or
    lowered (a lead made a member)."""
    teams = {team.slug: team for team in Team.objects.filter(slug__in=access.teams)}
    memberships = {m.team_id: m for m in Membership.objects.filter(user=user, team__in=teams.values())}
    revoked = False
    for slug, wanted in access.teams.items():
        team = teams.get(slug)
        if team is None:
            logger.warning("FLEETLINE_OIDC_GROUP_MAP names team %r, which does not exist: skipped", slug)
            continue
        membership = memberships.get(team.pk)
        if membership is None:
            if wanted is not None:
                membership_add(actor=None, team=team, user=user, role=wanted, source=SOURCE)
        elif wanted is None:
            membership_remove(actor=None, membership_id=membership.pk, source=SOURCE)
            revoked = True
        elif membership.role != wanted:
            membership_role_change(actor=None, membership_id=membership.pk, role=wanted, source=SOURCE)
            revoked = revoked or TEAM_ROLES.index(wanted) < TEAM_ROLES.index(membership.role)
    return revoked


def sso_login(*, claims: SsoClaims, group_map: GroupMap, link_existing: bool = False) -> User:
    """The account of a verified login, created at its first login (linked by issuer and subject,
    never found again by name), with its mapped roles and memberships brought up to date, each
    change audited. A login that takes access away closes the user's open websockets once it
    commits. Raises `SsoLoginRefused` for an account that may not sign in this way, writing nothing."""
    with transaction.atomic():
        user = _account_for(claims, link_existing=link_existing)
        if not user.is_active:
            raise SsoLoginRefused("This Fleetline account is deactivated.")
        if claims.email and user.email != claims.email:
            user.email = claims.email
            user.save(update_fields=["email"])
        access = group_map.access_for(claims.groups)
        revoked = _roles_sync(user, access)
        revoked = _teams_sync(user, access) or revoked
        if revoked:
            access_revoked.send(sender=Membership, user_ids=[user.pk])
    return user
