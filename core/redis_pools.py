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


@functools.lru_cache(maxsize=16)
def client_on(pool: redis.ConnectionPool) -> redis.Redis:
    """The process's client on ``pool``. A client is thread-safe but not cheap to make (about a
    tenth of a millisecond: its table of response callbacks), so it is made once, not per use."""
    return redis.Redis(connection_pool=pool)


def shared_redis(url: str) -> redis.Redis:
    """The process's client on its pool for ``url``."""
    return client_on(_pool(url, ()))
