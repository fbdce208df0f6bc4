"""Who may read ``/metrics``: a client on an allowed network, or one presenting the token.

The series name teams and the size of their work, so they are not public. Prometheus usually
scrapes from inside the deployment's network (``FLEETLINE_METRICS_ALLOWED_NETWORKS``, loopback by
default); a scraper elsewhere sends ``Authorization: Bearer <FLEETLINE_METRICS_TOKEN>``. The
client address is the one the ASGI server reports, which behind a proxy it takes from
``X-Forwarded-For`` only for the proxies it trusts (``--forwarded-allow-ips``).
"""

from __future__ import annotations

import hmac
import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in spec)


def _from_allowed_network(request: HttpRequest) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks(tuple(settings.FLEETLINE_METRICS_ALLOWED_NETWORKS)))


def _bearer_token(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def metrics_access_allowed(*, request: HttpRequest) -> bool:
    expected = settings.FLEETLINE_METRICS_TOKEN
    if expected and hmac.compare_digest(_bearer_token(request).encode(), expected.encode()):
        return True
    return _from_allowed_network(request)
