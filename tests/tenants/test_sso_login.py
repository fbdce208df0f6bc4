"""Single sign-on's account service: an account per provider subject, created at its first login,
and the roles and memberships the operator's group map manages kept to the groups at every login,
each change audited as single sign-on's, everything else left alone."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from tenants.group_map import group_map_parse
from tenants.models import AuditEvent, Membership, OidcIdentity
from tenants.permissions import is_finance, is_fleet_admin
from tenants.services.sso import SOURCE, SsoClaims, SsoLoginRefused, sso_login
from tenants.signals import access_revoked
from tests.tenants.conftest import World

ISSUER = "https://idp.example.org"
GROUP_MAP = group_map_parse(
    "ml-admins=role:admin,money=role:finance,lm-leads=team:language-models:lead,lm=team:language-models,"
    "ghosts=team:no-such-team"
)


def claims(groups: list[str], *, username: str = "alice", subject: str = "s-alice", email: str = "") -> SsoClaims:
    return SsoClaims(
        issuer=ISSUER,
        subject=subject,
        username=username,
        email=email or f"{username}@example.org",
        groups=frozenset(groups),
    )


def fresh(user: User) -> User:
    return User.objects.get(pk=user.pk)


def membership_role(user: User, world: World) -> str | None:
    return Membership.objects.filter(user=user, team=world.team).values_list("role", flat=True).first()


def kinds() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("kind", flat=True))


@pytest.fixture
def revoked() -> list[list[int]]:
    """The users each `access_revoked` signal named."""
    sent: list[list[int]] = []

    def receive(sender: type, *, user_ids: list[int], **kwargs: Any) -> None:
        sent.append(list(user_ids))

    access_revoked.connect(receive, dispatch_uid="test-sso-revoked")
    yield sent
    access_revoked.disconnect(dispatch_uid="test-sso-revoked")


def test_the_first_login_creates_the_account_without_a_password_and_grants_its_groups(world: World) -> None:
    user = sso_login(claims=claims(["ml-admins", "lm", "unmapped"]), group_map=GROUP_MAP)

    assert user.username == "alice" and user.email == "alice@example.org"
    assert not user.has_usable_password()
    assert OidcIdentity.objects.get(user=user).subject == "s-alice"
    assert is_fleet_admin(fresh(user)) and not is_finance(fresh(user))
    assert membership_role(user, world) == Membership.Role.MEMBER
    assert kinds() == [AuditEvent.Kind.SSO_ACCOUNT_CREATED, AuditEvent.Kind.ROLE_GRANTED, AuditEvent.Kind.MEMBER_ADDED]
    assert set(AuditEvent.objects.values_list("source", "actor")) == {(SOURCE, None)}
    added = AuditEvent.objects.get(kind=AuditEvent.Kind.MEMBER_ADDED)
    assert added.team == world.team and added.after == {"user": "alice", "role": "member"}


def test_the_next_login_finds_the_account_by_subject_and_follows_the_groups(
    world: World, revoked: list[list[int]]
) -> None:
    user = sso_login(claims=claims(["ml-admins", "lm"]), group_map=GROUP_MAP)
    AuditEvent.objects.all().delete()

    # The provider renamed the user and changed their groups: the same account, brought up to date.
    again = sso_login(
        claims=claims(["lm-leads", "money"], username="alice2", email="a@example.org"), group_map=GROUP_MAP
    )

    assert again.pk == user.pk and fresh(user).email == "a@example.org"
    assert not is_fleet_admin(fresh(user)) and is_finance(fresh(user))
    assert membership_role(user, world) == Membership.Role.LEAD
    assert sorted(kinds()) == sorted(
        [AuditEvent.Kind.ROLE_REVOKED, AuditEvent.Kind.ROLE_GRANTED, AuditEvent.Kind.MEMBER_ROLE_CHANGED]
    )
    assert revoked == [[user.pk]]  # the admin role went: the user's sockets close


def test_a_removed_group_removes_the_membership_audits_it_and_closes_the_sockets(
    world: World, revoked: list[list[int]]
) -> None:
    user = sso_login(claims=claims(["lm"]), group_map=GROUP_MAP)
    assert revoked == []

    sso_login(claims=claims([]), group_map=GROUP_MAP)

    assert membership_role(user, world) is None
    removed = AuditEvent.objects.get(kind=AuditEvent.Kind.MEMBER_REMOVED)
    assert (removed.team, removed.source, removed.before) == (world.team, SOURCE, {"user": "alice", "role": "member"})
    assert revoked == [[user.pk]]


def test_a_lead_made_a_member_loses_access_but_a_login_that_changes_nothing_writes_nothing(
    world: World, revoked: list[list[int]]
) -> None:
    sso_login(claims=claims(["lm-leads"]), group_map=GROUP_MAP)
    sso_login(claims=claims(["lm"]), group_map=GROUP_MAP)
    assert len(revoked) == 1
    count = AuditEvent.objects.count()

    sso_login(claims=claims(["lm"]), group_map=GROUP_MAP)

    assert AuditEvent.objects.count() == count and len(revoked) == 1


def test_memberships_and_roles_the_map_does_not_name_are_left_alone(world: World) -> None:
    """The outsider leads Vision, which the map does not name; finance is mapped only in another map."""
    OidcIdentity.objects.create(user=world.outsider, issuer=ISSUER, subject="s-out")
    world.outsider.groups.add(*world.finance.groups.all())

    sso_login(
        claims=claims([], username=world.outsider.username, subject="s-out"),
        group_map=group_map_parse("lm=team:language-models"),
    )

    assert Membership.objects.get(user=world.outsider).team == world.other_team
    assert is_finance(fresh(world.outsider))
    assert not AuditEvent.objects.exists()


def test_an_existing_password_account_of_the_same_name_is_not_taken_over(world: World) -> None:
    with pytest.raises(SsoLoginRefused, match="already has an account named fleet-admin"):
        sso_login(claims=claims([], username="fleet-admin", subject="attacker"), group_map=GROUP_MAP)
    assert not OidcIdentity.objects.exists()
    assert not AuditEvent.objects.exists()


def test_linking_existing_accounts_when_the_operator_allows_it_is_audited(world: World) -> None:
    user = sso_login(
        claims=claims(["lm-leads"], username=world.member.username), group_map=GROUP_MAP, link_existing=True
    )

    assert user.pk == world.member.pk
    assert membership_role(user, world) == Membership.Role.LEAD
    assert kinds() == [AuditEvent.Kind.SSO_ACCOUNT_LINKED, AuditEvent.Kind.MEMBER_ROLE_CHANGED]
    # A second subject may not claim the same account.
    with pytest.raises(SsoLoginRefused):
        sso_login(
            claims=claims([], username=world.member.username, subject="other"), group_map=GROUP_MAP, link_existing=True
        )


def test_a_deactivated_account_is_refused_and_its_memberships_stay(world: World) -> None:
    user = sso_login(claims=claims(["lm"]), group_map=GROUP_MAP)
    User.objects.filter(pk=user.pk).update(is_active=False)
    count = AuditEvent.objects.count()

    with pytest.raises(SsoLoginRefused, match="deactivated"):
        sso_login(claims=claims([]), group_map=GROUP_MAP)

    assert membership_role(user, world) == Membership.Role.MEMBER
    assert AuditEvent.objects.count() == count
