"""Channel-layer group names and message types, in one place so publishers and consumers agree."""

from __future__ import annotations

FLEET_GROUP = "fleet"
# Every job event of every team: fleet admins join it.
ALL_JOBS_GROUP = "jobs.all"

# Messages a socket handles itself rather than forwarding: what its user may read changed (a
# membership or a role), or one of the user's sessions ended (logout).
ACCESS_CHANGED = "access.changed"
SESSION_ENDED = "session.ended"
# An API token was revoked: the sockets it opened close at once.
TOKEN_REVOKED = "token.revoked"


def team_group(team_id: int) -> str:
    return f"team.{team_id}"


def user_group(user_id: int) -> str:
    """Every open socket of one user, whichever session opened it."""
    return f"user.{user_id}"


def token_group(token_digest: str) -> str:
    """Every open socket opened with one API token. Group names are at most 100 characters: the
    digest's first 64 hex digits (256 bits) name the token unambiguously."""
    return f"token.{token_digest[:64]}"
