"""The follower's inbox is bounded: a fast producer is paced, never dropped, never deadlocked."""

from __future__ import annotations

import threading
import time

from bringup.adapters.clock import SystemClock
from bringup.adapters.sources.items import LineItem, LinesItem
from bringup.follow.samplers import Inbox


def _produce(inbox: Inbox, items: list[object]) -> threading.Thread:
    t = threading.Thread(target=lambda: [inbox.put(i) for i in items], daemon=True)
    t.start()
    return t


def _drain(inbox: Inbox, n: int, *, every: int = 0) -> list[object]:
    got: list[object] = []
    while len(got) < n:
        item = inbox.get(5.0)
        assert item is not None, f"nothing came after {len(got)} items"
        got.append(item)
        if every and len(got) % every == 0:
            time.sleep(0.001)  # a follower slower than the writer
    return got


def test_a_fast_writer_is_paced_to_the_bound_and_loses_nothing() -> None:
    """50,000 lines put as fast as a thread can, taken slowly: the inbox never holds more
    than its bound, the writer waited, and every line arrives once, in order."""
    inbox = Inbox(SystemClock(), max_items=500)
    lines = [LineItem("log", f"line {i}") for i in range(50_000)]
    producer = _produce(inbox, lines)
    assert _drain(inbox, len(lines), every=100) == lines
    producer.join(10)
    assert not producer.is_alive()
    assert inbox.peak_items <= 500
    assert inbox.paced > 0
    assert inbox.over_bound == 0
    assert inbox.get_nowait() is None


def test_the_bound_counts_characters_of_lines_too() -> None:
    """Long lines (and batches of lines) are bounded by their characters, not their count."""
    inbox = Inbox(SystemClock(), max_items=10_000, max_chars=100_000)
    items: list[object] = [LineItem("log", "x" * 10_000) for _ in range(200)]
    items += [LinesItem("stdout", ["y" * 5_000] * 4) for _ in range(100)]
    producer = _produce(inbox, items)
    assert _drain(inbox, len(items), every=7) == items
    producer.join(10)
    assert inbox.peak_chars <= 100_000
    assert inbox.paced > 0


def test_a_follower_that_stopped_taking_never_deadlocks_a_producer() -> None:
    """While the follower is busy elsewhere (stopping servers, joining their readers), a
    producer is let in over the bound instead of waiting for ever; nothing is lost."""
    inbox = Inbox(SystemClock(), max_items=100)
    lines = [LineItem("log", str(i)) for i in range(1_000)]
    producer = _produce(inbox, lines)
    producer.join(30)  # a hang guard, not a timing claim
    assert not producer.is_alive()
    assert inbox.over_bound > 0
    assert _drain(inbox, len(lines)) == lines


def test_puts_from_the_followers_own_thread_never_wait() -> None:
    """InlineLane puts on the follower's thread: waiting there for room would wait for itself."""
    inbox = Inbox(SystemClock(), max_items=10)
    for i in range(100):
        inbox.put(LineItem("log", str(i)))
    assert inbox.paced == 0
    assert [inbox.get_nowait() for _ in range(100)] == [LineItem("log", str(i)) for i in range(100)]


def test_signals_are_taken_first_and_without_the_lock() -> None:
    inbox = Inbox(SystemClock(), max_items=10)
    inbox.put(LineItem("log", "a"))
    inbox.put_from_signal("SIGTERM")
    assert inbox.get_nowait() == "SIGTERM"
    assert inbox.get_nowait() == LineItem("log", "a")
