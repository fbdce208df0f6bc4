"""Global roles are Django groups; team roles live on Membership."""

from __future__ import annotations

FLEET_ADMIN = "fleet-admin"
FINANCE = "finance"
