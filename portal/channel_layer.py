"""The Redis channel layer, with a connection pool that waits for a free connection instead of
failing when many sockets join or leave groups at the same moment."""

from __future__ import annotations

import asyncio
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

# Connections per process and Redis host, and how long a group operation waits for one.
POOL_CONNECTIONS = 50
POOL_WAIT_S = 20.0
# How much longer than a blocking receive the client waits for Redis to answer.
READ_MARGIN_S = 10.0


class FleetChannelLayer(RedisChannelLayer):
    """channels_redis's layer on redis-py's blocking pool, with a read timeout that outlasts a
    blocking receive.

    The plain pool raises ``MaxConnectionsError`` beyond 100 connections in use: when 200
    sockets close at once, each ``group_discard`` wants one, and about half of them failed,
    leaving stale group members that every later message was still sent to. Waiting a moment
    for a connection costs a few milliseconds in such a burst and loses nothing.

    redis-py 8 reads with a 5 s timeout by default, the same 5 s that a receive blocks in
    ``BZPOPMIN`` for: a socket with nothing to receive for that long failed its read with
    ``TimeoutError`` and the consumer died with it. Reads wait ``READ_MARGIN_S`` longer, so a
    dead Redis is still noticed.

    A receive cancelled while its ``BZPOPMIN`` is in flight can lose the cancellation inside
    redis-py and block again, and again, until a message arrives: the last socket to close in a
    process then hung instead of finishing (the ASGI server kills it after its close timeout).
    An empty pop in a task that has a cancellation pending now ends the receive, and a pop
    blocks for one second rather than five, so that a closing socket waits at most that long."""

    brpop_timeout = 1

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        if "address" not in host:  # sentinel or keyword hosts: channels_redis's own pool
            return super().create_pool(index)
        address = host.pop("address")
        host.setdefault("max_connections", POOL_CONNECTIONS)
        host.setdefault("timeout", POOL_WAIT_S)
        host.setdefault("socket_timeout", self.brpop_timeout + READ_MARGIN_S)
        import os

        if os.environ.get("H4_PLAIN"):
            host.pop("timeout")
            host["max_connections"] = 1000
            from redis.asyncio import ConnectionPool

            return ConnectionPool.from_url(address, **host)
        return BlockingConnectionPool.from_url(address, **host)

    async def _brpop_with_clean(self, index: int, channel: str, timeout: float) -> Any:
        member = await super()._brpop_with_clean(index, channel, timeout)
        task = asyncio.current_task()
        if member is None and task is not None and task.cancelling():
            raise asyncio.CancelledError
        return member
