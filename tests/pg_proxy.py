"""A TCP proxy in the test's own trio loop between a broker and the tests' PostgreSQL cluster,
that can be paused: while paused it accepts and reads what either side sends but forwards
nothing (a link that went silent, not one that refuses), and on resume forwards what it held.
What the broker sent while paused is kept (`held`), so a test can wait until a statement it
caused is stuck on the link."""

from __future__ import annotations

import trio


class PausableProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._flowing = trio.Event()
        self._flowing.set()
        self.port = 0
        #: Bytes the broker sent while the link was paused.
        self.held = bytearray()
        self._held_changed = trio.Event()

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._handle, listeners)

    @property
    def flowing(self) -> bool:
        """Whether the link passes data (not paused)."""
        return self._flowing.is_set()

    def pause(self) -> None:
        self.held.clear()
        self._flowing = trio.Event()

    def resume(self) -> None:
        self._flowing.set()

    async def wait_held(self, marker: bytes) -> None:
        """Until the broker sent `marker` while the link was paused."""
        while marker not in self.held:
            self._held_changed = trio.Event()
            await self._held_changed.wait()

    async def _handle(self, client: trio.SocketStream) -> None:
        async with client:
            try:
                server = await trio.open_tcp_stream(*self._upstream)
            except OSError:
                return
            async with server, trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, client, server, True, nursery.cancel_scope)
                nursery.start_soon(self._pump, server, client, False, nursery.cancel_scope)

    async def _pump(
        self,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        from_broker: bool,
        both: trio.CancelScope,
    ) -> None:
        try:
            async for data in source:
                if not self._flowing.is_set():
                    if from_broker:
                        self.held += data
                        self._held_changed.set()
                    await self._flowing.wait()
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        both.cancel()  # one side closed: close the other
