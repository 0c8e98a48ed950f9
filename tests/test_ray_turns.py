"""The agent turns of ``--executor ray --jobs N`` (runner/rayturns.py), as the actor's own code: N turns at
most, the lowest ticket waiting served first, and an attempt the driver ended (its worker or node lost,
the run cancelled) never left holding a turn or granted one later. The same class runs as a Ray actor in
tests/test_ray_executor.py."""

from __future__ import annotations

import asyncio

from gripprobe_core.runner.rayturns import AgentTurns


def test_at_most_n_turns_and_each_given_back_once():
    async def scenario() -> tuple[list[int], int]:
        turns, running, seen = AgentTurns(2), [0], []

        async def case(ticket: int) -> None:
            assert await turns.take(ticket)
            assert await turns.take(ticket)  # asking again is no second turn
            running[0] += 1
            seen.append(running[0])
            await asyncio.sleep(0.01)
            running[0] -= 1
            await turns.end(ticket)
            await turns.end(ticket)  # nor is a second end a second release

        await asyncio.wait_for(asyncio.gather(*(case(t) for t in range(7))), 5.0)
        return seen, (await turns.held())[1]

    seen, peak = asyncio.run(scenario())
    assert max(seen) == 2 and len(seen) == 7 and peak == 2


def test_the_lowest_ticket_waiting_goes_first_and_an_absent_one_holds_nobody_up():
    """Ticket 1 never asks (its task waits for its node's resource): 2 and 3 are served, lowest first."""
    async def scenario() -> list[int]:
        turns, order = AgentTurns(1), []
        assert await turns.take(0)

        async def case(ticket: int) -> None:
            assert await turns.take(ticket)
            order.append(ticket)
            await asyncio.sleep(0.005)
            await turns.end(ticket)

        waiting = [asyncio.ensure_future(case(t)) for t in (3, 2)]
        await asyncio.sleep(0.01)
        await turns.end(0)
        await asyncio.wait_for(asyncio.gather(*waiting), 5.0)
        return order

    assert asyncio.run(scenario()) == [2, 3]


def test_an_ended_attempt_gives_its_turn_on_and_never_gets_one():
    """The driver ends a lost attempt's ticket: the turn its dead worker held goes to the next case; a worker
    still waiting is told no; a request that arrives after the end (sent before the worker died) is refused."""
    async def scenario() -> list:
        turns, got = AgentTurns(1), []
        assert await turns.take(0)  # held by a worker whose node then dies
        waiter = asyncio.ensure_future(turns.take(1))
        await asyncio.sleep(0)
        await turns.end(2)  # ended before it ever asked
        await turns.end(0)  # the driver ends the lost attempt: ticket 1 gets the turn
        got.append(await asyncio.wait_for(waiter, 1.0))
        late = asyncio.ensure_future(turns.take(3))
        await asyncio.sleep(0)
        await turns.end(3)  # ... and ticket 3 is ended while it waits
        got.append(await asyncio.wait_for(late, 1.0))
        got.append(await asyncio.wait_for(turns.take(2), 1.0))
        await turns.end(1)
        got.append(await turns.held())
        return got

    assert asyncio.run(scenario()) == [True, False, False, (0, 1)]
