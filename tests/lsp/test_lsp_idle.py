"""lsp_server.idle: when the document's kept context is refreshed, with a stand-in refresh."""

from __future__ import annotations

import asyncio
import time

from lsp_server.idle import QUIET_PER_REFRESH, IdleRefresh


def run_session(script) -> list[tuple[str, int, float]]:
    """Run ``script(idle)`` on an event loop; the refreshes it caused: (text, offset, when)."""
    calls: list[tuple[str, int, float]] = []

    async def refresh(uri, text, offset, still_wanted):
        calls.append((text, offset, time.monotonic()))
        await asyncio.sleep(0.1)  # what a refresh takes
        return 10

    async def main():
        await script(IdleRefresh(refresh))

    asyncio.run(main())
    return calls


def test_a_refresh_waits_for_quiet_and_a_new_change_restarts_the_wait():
    async def script(idle):
        idle.opened("u", "def f():\n    pass\n")
        idle.changed("u", "def f():\n    return 1\n", 0.15)
        await asyncio.sleep(0.1)
        idle.changed("u", "def f():\n    return 12\n", 0.15)  # typing on: the first never runs
        await asyncio.sleep(0.4)

    [(text, offset, _)] = run_session(script)
    assert text == "def f():\n    return 12\n"
    assert offset == len("def f():\n    return 1")  # where the last change began


def test_no_refresh_without_a_change_or_when_turned_off():
    async def script(idle):
        idle.opened("u", "x = 1\n")
        idle.changed("u", "x = 1\n", 0.05)  # the same text
        idle.changed("u", "x = 2\n", 0)  # idleRefresh 0
        idle.opened("v", "y = 1\n")
        idle.changed("v", "y = 2\n", 0.05)
        idle.closed("v")  # closed before the quiet ended
        await asyncio.sleep(0.3)

    assert run_session(script) == []


def test_the_quiet_waited_for_grows_with_what_the_last_refresh_took():
    starts = []

    async def script(idle):
        idle.opened("u", "a = 1\n")
        starts.append(time.monotonic())
        idle.changed("u", "a = 2\n", 0.05)
        await asyncio.sleep(0.3)  # refreshed after 0.05 s; it took 0.1 s
        starts.append(time.monotonic())
        idle.changed("u", "a = 3\n", 0.05)
        await asyncio.sleep(0.2)
        assert idle.last_seconds >= 0.1
        await asyncio.sleep(0.5)

    first, second = run_session(script)
    assert first[2] - starts[0] < 0.2
    assert second[2] - starts[1] >= QUIET_PER_REFRESH * 0.1 - 0.01  # not after 0.05 s


def test_a_document_that_opens_is_prepared_after_the_quiet():
    async def script(idle):
        idle.opened("u", "def f():\n    pass\n", 0.05)
        idle.opened("v", "x = 1\n", 0.05)
        idle.changed("v", "x = 2\n", 0)  # typed at once, refresh turned off: v is not prepared
        await asyncio.sleep(0.3)

    [(text, offset, _)] = run_session(script)
    assert (text, offset) == ("def f():\n    pass\n", 0)
