"""What tenants' services announce once they change something that people's open pages show.

Tenants sits below the web layer (`portal`) and the scheduler and publishes nothing itself: its
services send these signals, and `portal.socket_receivers` receives them and forwards them to the
users' websockets after the transaction commits (`tests/test_import_boundary.py` keeps tenants'
services, selectors and models from importing `portal`).
"""

from __future__ import annotations

from django.dispatch import Signal

# A notice was created for a user. Keyword arguments: ``user_id``, ``message``, ``url`` and the
# user's ``unread`` count with it.
notice_created = Signal()

# Users' team memberships changed. Keyword argument: ``user_ids``. Their open sockets re-check
# which teams' events they may read.
memberships_changed = Signal()

# Users lost access (a membership or a role taken away at their single sign-on). Keyword
# argument: ``user_ids``. Their open sockets close at once; their pages reconnect with the access
# that stands now.
access_revoked = Signal()
