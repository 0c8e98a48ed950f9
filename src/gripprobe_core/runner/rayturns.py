"""``--jobs N`` across a Ray cluster: at most N agents at once on the whole cluster, as the local executor's
:class:`~.phase.AgentSlots` bound them in one process.

The driver (:mod:`.rayexec`) keeps up to ``2 N`` cases under way on the cluster, each a Ray task holding its
own resources; one :class:`AgentTurns` actor per executor, on the driver's node, hands out the N agent
turns. A case's worker (:mod:`.raywork`) asks for a turn just before its first agent starts and gives it
back after its last agent exits (:class:`.raywork.ClusterSlots`), so the next case is prepared, and the last one
judged, packed and shipped back, while an agent runs — the overlap the local executor has.

A turn is named by a ticket the driver issues per attempt, in plan order. A free turn goes to the lowest
ticket waiting (not strictly the next in plan, as locally: Ray decides which submitted task starts when,
and a case waiting for its node's resource must not hold up a case that is ready). The driver ends every
attempt's ticket when the attempt ends, however it ends (delivered, its node lost, cancelled): a turn
held by a worker that died is given back then, and a ticket ended before its worker asked is never
granted. This module imports nothing heavy: the actor's process starts in a fraction of the harness's
import time.
"""

from __future__ import annotations

import asyncio

__all__ = ["AgentTurns"]


class AgentTurns:
    """The body of the Ray async actor that grants agent turns (one per executor; see the module)."""

    def __init__(self, slots: int):
        self._free = max(1, slots)
        self._waiting: dict[int, asyncio.Future] = {}
        self._held: set[int] = set()
        self._ended: set[int] = set()
        self.peak = 0

    async def take(self, ticket: int) -> bool:
        """Wait for a turn for ``ticket``: True once granted, False if the ticket was ended first."""
        if ticket in self._held:
            return True
        if ticket in self._ended:
            return False
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = waiter
        self._grant()
        return bool(await waiter)

    async def end(self, ticket: int) -> None:
        """``ticket``'s turn given back (its last agent exited) or its attempt over: idempotent."""
        self._ended.add(ticket)
        waiter = self._waiting.pop(ticket, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(False)
        if ticket in self._held:
            self._held.discard(ticket)
            self._free += 1
            self._grant()

    async def held(self) -> tuple[int, int]:
        """Turns held now and the most ever held at once (for tests)."""
        return len(self._held), self.peak

    def _grant(self) -> None:
        while self._free > 0 and self._waiting:
            ticket = min(self._waiting)
            waiter = self._waiting.pop(ticket)
            if waiter.done():
                continue
            self._free -= 1
            self._held.add(ticket)
            self.peak = max(self.peak, len(self._held))
            waiter.set_result(True)
