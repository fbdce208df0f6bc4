"""One Redis connection pool per URL and process, shared by every request.

Django keeps its cache backends per request context, and under ASGI every request is a context of
its own: a ``RedisCache`` (the API's throttle) made a pool, and so a TCP connection, per request.
Code that called ``redis.Redis.from_url`` per use did the same. Both take their pool from here
instead; redis-py's pools are thread-safe and notice a fork, so one per process is enough."""

from __future__ import annotations

import functools
from typing import Any

import redis


@functools.lru_cache(maxsize=16)
def _pool(url: str, options: tuple[tuple[str, Any], ...]) -> redis.ConnectionPool:
    return redis.ConnectionPool.from_url(url, **dict(options))


class SharedConnectionPool(redis.ConnectionPool):
    """For ``CACHES[...]["OPTIONS"]["pool_class"]``: ``from_url`` hands out the process's pool for
    that URL and those options rather than a new one."""

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        return _pool(url, tuple(sorted(kwargs.items())))


def shared_redis(url: str) -> redis.Redis:
    """A client on the process's pool for ``url`` (clients are cheap; pools hold the connections)."""
    return redis.Redis(connection_pool=_pool(url, ()))
