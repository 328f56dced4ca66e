"""run_unless_stopped: work on a helper thread that a stop leaves behind at once."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.left_readers import Stopped, readers_left, run_unless_stopped


def test_a_stop_returns_at_once_and_the_late_result_is_discarded_when_it_arrives() -> None:
    answer, stop, discarded = threading.Event(), threading.Event(), []

    def slow_open() -> str:
        answer.wait(10)
        return "reader"

    threading.Timer(0.1, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(Stopped):
        run_unless_stopped(slow_open, stop.is_set, discarded.append)
    assert time.monotonic() - t0 < 0.5
    left = [t for t in readers_left() if t.name.endswith(":open")]
    assert len(left) == 1 and discarded == []  # the exit waits for (or exits past) the open
    answer.set()  # the server answers after all: nobody takes the result
    left[0].join(5)
    assert discarded == ["reader"] and left[0] not in readers_left()


def test_work_that_ends_before_a_stop_hands_over_its_result_or_its_error() -> None:
    discarded: list[str] = []
    assert run_unless_stopped(lambda: "reader", threading.Event().is_set, discarded.append) == "reader"

    def refused() -> str:
        raise ValueError("cannot open source rtsp://cam: Connection refused")

    with pytest.raises(ValueError, match="Connection refused"):
        run_unless_stopped(refused, threading.Event().is_set, discarded.append)
    assert discarded == []


def test_an_error_after_a_stop_is_dropped() -> None:
    answer, discarded = threading.Event(), []

    def refused_late() -> str:
        answer.wait(10)
        raise ValueError("refused")

    with pytest.raises(Stopped):
        run_unless_stopped(refused_late, lambda: True, discarded.append)
    answer.set()
    deadline = time.monotonic() + 5
    while [t for t in readers_left() if t.name.endswith(":open")] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert discarded == [] and not [t for t in readers_left() if t.name.endswith(":open")]
