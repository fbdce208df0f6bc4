"""Turn one ``REDIS_URL`` into the spelling that Celery expects."""

from __future__ import annotations

from urllib.parse import urlsplit


def celery_url(redis_url: str) -> str:
    """Celery (broker and result backend) names unix sockets ``redis+socket://``."""
    parts = urlsplit(redis_url)
    if parts.scheme == "unix":
        query = f"?{parts.query}" if parts.query else ""
        return f"redis+socket://{parts.path}{query}"
    return redis_url
