"""The Redis channel layer, with a connection pool that waits for a free connection instead of
failing when many sockets join or leave groups at the same moment, and one reader per process
that hands each message to the channels it names."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels_redis.core import BoundedQueue, ChannelLock, RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

logger = logging.getLogger(__name__)

# Takes a message of its channel (True) or leaves it for the channel's inbox (False); must not block.
Sink = Callable[[dict[str, Any]], bool]
# Makes the message every channel with a sink gets at each beat (`FleetChannelLayer.beat_set`).
Beat = Callable[[], Awaitable[dict[str, Any]]]

# Connections per process and Redis host, and how long a group operation waits for one.
POOL_CONNECTIONS = 50
POOL_WAIT_S = 20.0
# How much longer than a blocking receive the client waits for Redis to answer.
READ_MARGIN_S = 10.0


class FleetChannelLayer(RedisChannelLayer):
    """channels_redis's layer on redis-py's blocking pool, with a read timeout that outlasts a
    blocking receive, and a process-wide reader in place of its per-receive lock.

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
    blocks for one second rather than five, so that a closing socket waits at most that long.

    A group send already reaches each process once, naming the process's channels in the group
    (channels_redis batches them); but every waiting ``receive`` of a process raced for a lock
    with two fresh tasks, and each delivery cancelled the losers' lock waits, each cancellation
    searching the lock's queue of waiters: with thousands of sockets a heartbeat cost time
    quadratic in the sockets of a process. Here one reader task per process pops the process's
    messages while anyone waits and puts each into the inbox of every channel it names (the same
    decoded message, shared: receivers must not change it); a ``receive`` waits on its inbox only.
    A channel may take its messages in the reader's turn instead (``sink_add``): a socket queues an
    event to write without a task switch per socket and message.

    Beside the reader, while it reads, a beat (``beat_set``) hands every channel with a sink the
    message it makes, on the clock's whole multiples of its interval: the fleet's heartbeat is made
    and encoded once per process and beat, and never queues behind ticks or messages in Redis."""

    brpop_timeout = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inboxes: dict[str, BoundedQueue] = {}
        self.sinks: dict[str, Sink] = {}
        self.waiting = 0
        self.reader: asyncio.Task[None] | None = None
        self.reader_loop: asyncio.AbstractEventLoop | None = None
        self.beat: tuple[Beat, float] | None = None
        self.beater: asyncio.Task[None] | None = None

    def sink_add(self, channel: str, sink: Sink) -> None:
        """Hand the messages of a process-local ``channel`` to ``sink`` first, in the reader's
        own turn: what it takes (returns True for) never reaches the channel's inbox, so a group
        message costs no task switch per socket that takes it."""
        self.sinks[channel] = sink

    def sink_discard(self, channel: str) -> None:
        self.sinks.pop(channel, None)

    def beat_set(self, beat: Beat, interval_s: float) -> None:
        """Every ``interval_s`` seconds while the process reads, hand every channel with a sink the
        message ``beat`` makes (one message for all of them)."""
        if not interval_s > 0:
            raise ValueError(f"a beat's interval must be above 0 seconds, not {interval_s!r}")
        if self.beat != (beat, interval_s):
            self.beat = (beat, interval_s)
            if self.beater is not None and not self.beater.done():
                self.beater.cancel()
            self.beater = None
        if self.reader is not None and not self.reader.done():
            self._beater_ensure(self.reader.get_loop())

    def beat_stop(self) -> None:
        """No more beats until the next ``beat_set``."""
        self.beat = None
        if self.beater is not None and not self.beater.done():
            self.beater.cancel()
        self.beater = None

    def _beater_ensure(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.beat is None:
            return
        if self.beater is not None and not self.beater.done() and self.beater.get_loop() is loop:
            return
        self.beater = loop.create_task(self._beat_every(*self.beat))

    async def _beat_every(self, beat: Beat, interval_s: float) -> None:
        """A message that cannot be made at a beat (the database away) is logged and skipped."""
        while True:
            await asyncio.sleep(interval_s - time.time() % interval_s)
            try:
                message = await beat()
            except Exception:  # noqa: BLE001 - the next second tries again
                logger.warning("The beat's message could not be made", exc_info=True)
                continue
            for sink in list(self.sinks.values()):
                sink(message)

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        if "address" not in host:  # sentinel or keyword hosts: channels_redis's own pool
            return super().create_pool(index)
        address = host.pop("address")
        host.setdefault("max_connections", POOL_CONNECTIONS)
        host.setdefault("timeout", POOL_WAIT_S)
        host.setdefault("socket_timeout", self.brpop_timeout + READ_MARGIN_S)
        return BlockingConnectionPool.from_url(address, **host)

    async def _brpop_with_clean(self, index: int, channel: str, timeout: float) -> Any:
        member = await super()._brpop_with_clean(index, channel, timeout)
        task = asyncio.current_task()
        if member is None and task is not None and task.cancelling():
            raise asyncio.CancelledError
        return member

    async def receive(self, channel: str) -> Any:
        """The next message of ``channel``. A process-local channel (``specific.<process>!<id>``)
        waits on its inbox, filled by the process's reader; any other is popped directly."""
        if "!" not in channel:
            return await super().receive(channel)
        assert self.require_valid_channel_name(channel)
        process_channel = self.non_local_name(channel)
        assert process_channel.endswith(self.client_prefix + "!"), "Wrong client prefix"
        inbox = self._inbox(channel)
        if not inbox.empty():
            return _message_or_raise(inbox.get_nowait())
        self.waiting += 1
        self._reader_ensure(process_channel)
        try:
            message = await inbox.get()
        except BaseException:
            # A receive is cancelled when its consumer ends: drop the inbox it leaves empty, and
            # stop reading when nobody else waits (a loop that ends cancels the reader anyway).
            self.waiting -= 1
            if inbox.empty() and self.inboxes.get(channel) is inbox:
                del self.inboxes[channel]
            if self.waiting == 0:
                self._reader_stop()
            raise
        self.waiting -= 1
        return _message_or_raise(message)

    def _inbox(self, channel: str) -> BoundedQueue:
        inbox = self.inboxes.get(channel)
        if inbox is None:
            inbox = self.inboxes[channel] = BoundedQueue(self.capacity)
        return inbox

    def _reader_ensure(self, process_channel: str) -> None:
        """Start the reader on the running loop unless it runs there already. A reader left on
        another loop that is still running means two loops receive at once, which one process
        channel cannot serve."""
        loop = asyncio.get_running_loop()
        if self.reader is not None and not self.reader.done():
            reader_loop = self.reader.get_loop()
            if reader_loop is loop:
                return
            if reader_loop.is_running():
                raise RuntimeError("Two event loops are trying to receive() on one channel layer at once!")
        if self.reader_loop is not loop:
            # A loop that ended (a test's, an async_to_sync call's) may have left a backup queue's
            # lock held, its cleaner never run: that lock belongs to the dead loop. The backup
            # itself goes back to the queue at the next pop, so nothing is lost.
            self.receive_clean_locks = ChannelLock()
            self.receive_cleaners: list[asyncio.Task[Any]] = []
            self.reader_loop = loop
        self.reader = loop.create_task(self._read(process_channel))
        self._beater_ensure(loop)

    def _reader_stop(self) -> None:
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()
        self.reader = None
        if self.beater is not None and not self.beater.done():
            self.beater.cancel()
        self.beater = None

    async def _read(self, process_channel: str) -> None:
        """Pop the process's messages one after another and hand each to the channels it names
        (one, or every local member of a group). A failed pop fails the receives waiting now,
        as a failed receive did before; their consumers decide what follows."""
        while True:
            try:
                names, message = await self.receive_single(process_channel)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - handed to the receivers, which raise it
                self._fail_waiting(error)
                return
            for name in names if isinstance(names, list) else [names]:
                sink = self.sinks.get(name)
                if sink is None or not sink(message):
                    self._inbox(name).put_nowait(message)

    def _fail_waiting(self, error: Exception) -> None:
        """Every empty inbox gets the failure, so that the receive waiting on it raises it."""
        self.reader = None
        for inbox in self.inboxes.values():
            if inbox.empty():
                inbox.put_nowait(_ReadFailed(error))


def _message_or_raise(item: Any) -> Any:
    if isinstance(item, _ReadFailed):
        raise item.error
    return item


class _ReadFailed:
    """A pop that failed, in an inbox in place of a message."""

    def __init__(self, error: Exception) -> None:
        self.error = error
