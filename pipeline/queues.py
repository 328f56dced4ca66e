"""Bounded queues between threads, with a policy for when they are full.

``block``: the producer waits (file sources: nothing is lost).
``drop_oldest``: the oldest item is discarded and counted (live sources keep
only the newest frames).  Every wait has a timeout and watches a stop event.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Literal

__all__ = ["BoundedQueue", "Closed", "FullPolicy", "EMPTY"]

EMPTY = object()  # returned by BoundedQueue.get when give_up_after runs out
#: a queue keeps the monotonic times of this many of its latest drops
DROP_TIMES_KEPT = 1000

FullPolicy = Literal["block", "drop_oldest"]


class Closed(Exception):
    """The run is stopping; the caller should return."""


class BoundedQueue:
    def __init__(self, maxsize: int, policy: FullPolicy, stop: threading.Event,
                 keep: Callable[[Any], bool] | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"queue size must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self.policy = policy
        self.stop = stop
        self.dropped = 0
        self.drop_times: collections.deque[float] = collections.deque(maxlen=DROP_TIMES_KEPT)
        self.full_puts = 0  # puts that found the queue full (waited, or dropped an item)
        self.puts = 0
        self.put_wait_s = 0.0  # time producers spent waiting for room
        self.get_wait_s = 0.0  # time consumers spent waiting for an item
        self.keep = keep  # items for which keep(item) is true are never dropped (markers)
        self._items: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition()

    def put(self, item: Any, timeout: float = 0.1) -> None:
        """Add ``item``; blocks (policy ``block``) until there is room or the run stops."""
        with self._cond:
            self.puts += 1
            if len(self._items) >= self.maxsize:
                self.full_puts += 1
                t0 = time.monotonic()
                try:
                    while len(self._items) >= self.maxsize:
                        if self.policy == "drop_oldest" and self._drop_one():
                            break
                        if self.stop.is_set():
                            raise Closed
                        self._cond.wait(timeout)
                finally:
                    self.put_wait_s += time.monotonic() - t0
            self._items.append(item)
            self._cond.notify_all()

    def _drop_one(self) -> bool:
        for i, old in enumerate(self._items):
            if self.keep is None or not self.keep(old):
                del self._items[i]
                self.dropped += 1
                self.drop_times.append(time.monotonic())
                return True
        return False  # only markers queued: wait like a blocking queue

    def put_final(self, item: Any) -> None:
        """Add an end marker even when full (never dropped, never blocks)."""
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def get(self, timeout: float = 0.1, give_up_after: float | None = None) -> Any:
        """Next item; raises Closed once the run stops and the queue is empty.

        With ``give_up_after`` (seconds), returns :data:`EMPTY` if nothing arrived by then.
        """
        deadline = None if give_up_after is None else time.monotonic() + give_up_after
        with self._cond:
            if not self._items:
                t0 = time.monotonic()
                try:
                    while not self._items:
                        if self.stop.is_set():
                            raise Closed
                        if deadline is not None:
                            left = deadline - time.monotonic()
                            if left <= 0:
                                return EMPTY
                            self._cond.wait(min(timeout, left))
                            continue
                        self._cond.wait(timeout)
                finally:
                    self.get_wait_s += time.monotonic() - t0
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def __len__(self) -> int:
        return len(self._items)
