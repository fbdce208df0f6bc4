from __future__ import annotations

from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        # Connects the logout receiver that closes the ended session's websockets, and the
        # receiver that writes login lockouts to the audit log.
        from portal import login_lockout, socket_receivers  # noqa: F401
