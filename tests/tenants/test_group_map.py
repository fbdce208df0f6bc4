"""The operator's group map: its syntax, its errors, and what a set of groups grants under it."""

from __future__ import annotations

import pytest

from tenants.group_map import GroupMapError, group_map_parse

MAP = "ml-admins=role:admin, finance=role:finance,vision-team=team:vision:lead,vision-all=team:vision,lm=team:lm:member"


def test_it_reads_roles_and_teams_with_member_as_the_default_team_role() -> None:
    parsed = group_map_parse(MAP)
    assert parsed.roles == {"admin": frozenset({"ml-admins"}), "finance": frozenset({"finance"})}
    assert parsed.teams == {"vision": (("vision-team", "lead"), ("vision-all", "member")), "lm": (("lm", "member"),)}


@pytest.mark.parametrize(
    ("groups", "roles", "teams"),
    [
        ([], {"admin": False, "finance": False}, {"vision": None, "lm": None}),
        (["ml-admins", "lm"], {"admin": True, "finance": False}, {"vision": None, "lm": "member"}),
        (["vision-all"], {"admin": False, "finance": False}, {"vision": "member", "lm": None}),
        # Both of a team's groups: the higher role wins, whichever comes first.
        (["vision-all", "vision-team"], {"admin": False, "finance": False}, {"vision": "lead", "lm": None}),
        (["unmapped", "finance"], {"admin": False, "finance": True}, {"vision": None, "lm": None}),
    ],
)
def test_it_grants_what_the_groups_map_to_and_names_every_mapped_role_and_team(
    groups: list[str], roles: dict[str, bool], teams: dict[str, str | None]
) -> None:
    access = group_map_parse(MAP).access_for(groups)
    assert access.roles == roles
    assert access.teams == teams


def test_it_leaves_unmapped_roles_and_teams_out_so_that_they_are_left_alone() -> None:
    access = group_map_parse("vision-team=team:vision:lead").access_for(["vision-team", "ml-admins"])
    assert access.roles == {}
    assert access.teams == {"vision": "lead"}


def test_an_empty_map_is_falsy_and_blank_entries_are_skipped() -> None:
    assert not group_map_parse("")
    assert not group_map_parse(" , ,")
    assert group_map_parse("a=role:admin,")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ml-admins", "expected GROUP=TARGET"),
        ("=role:admin", "expected GROUP=TARGET"),
        ("ml-admins=", "expected GROUP=TARGET"),
        ("ml-admins=role:root", "unknown role 'root'"),
        ("vision=team:vision:owner", "unknown team role 'owner'"),
        ("vision=team:", "'' is not a team slug"),
        ("vision=team:vi sion", "'vi sion' is not a team slug"),
        ("vision=group:vision", "unknown target 'group:vision'"),
    ],
)
def test_a_bad_entry_is_named_with_what_is_wrong_and_the_syntax(text: str, says: str) -> None:
    with pytest.raises(GroupMapError) as error:
        group_map_parse(f"ok=role:admin,{text}")
    assert says in str(error.value)
    assert repr(text.strip()) in str(error.value)
    assert "role:admin, role:finance, team:SLUG, team:SLUG:member or team:SLUG:lead" in str(error.value)
