"""Request priorities between cameras that share a compiled model.

OpenVINO's CPU plugin runs started requests first come, first served (``MODEL_PRIORITY``
orders compiled models, not requests, and the CPU plugin does not support it).  When a
model shared by several cameras is saturated, every camera's requests queue behind
everyone else's, and a camera that matters waits as long as any other.

A :class:`RequestArbiter` per compiled model keeps at most ``capacity`` requests
started (the model's streams, so the plugin never queues) and decides who starts
next: the waiting camera of highest priority, first come first served within a
level.  A camera with ``min_fps`` that has not started a request for ``1 / min_fps``
seconds goes ahead of everyone (its guaranteed minimum rate).  Cameras that wait do
not queue frames without bound: a live source keeps only its newest frames and counts
the ones it drops (:mod:`pipeline.runtime`).

A waiting camera finishes its own completed requests while it waits, so slots held
by finished work come back even when their owner is the one waiting.  Without any
priority set, pools use no arbiter and nothing changes.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["LEVELS", "SourcePriority", "RequestArbiter"]

#: priority names, most urgent first
LEVELS = ("high", "normal", "low")


@dataclass
class SourcePriority:
    """A camera's priority: ``level`` one of LEVELS; ``min_fps`` the rate it is guaranteed
    (0: none).  ``last_start`` (monotonic seconds) is kept by the arbiters."""

    level: str = "normal"
    min_fps: float = 0.0
    name: str = ""
    last_start: float = field(default_factory=time.monotonic)
    waits: int = 0            # starts that had to wait for a slot
    promoted: int = 0         # starts made ahead of others to keep min_fps

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown priority {self.level!r}; valid: {', '.join(LEVELS)}")
        if self.min_fps < 0:
            raise ValueError(f"min_fps must be >= 0, got {self.min_fps}")

    def rank(self, now: float) -> int:
        """-1 when starved below ``min_fps``, else the level's index (lower starts first)."""
        if self.min_fps > 0 and now - self.last_start > 1.0 / self.min_fps:
            return -1
        return LEVELS.index(self.level)


class RequestArbiter:
    """At most ``capacity`` requests started on one compiled model; waiters start in priority order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self._cond = threading.Condition()
        self._active = 0
        self._waiting: dict[int, SourcePriority] = {}
        self._order = itertools.count()

    @property
    def active(self) -> int:
        return self._active

    def acquire(self, who: SourcePriority, while_waiting: Callable[[], None] | None = None,
                poll_s: float = 0.001) -> None:
        """Block until ``who`` may start a request.  ``while_waiting`` runs between checks, on
        the caller's thread (a pool finishes its own completed requests there, which releases
        their slots)."""
        ticket = next(self._order)
        with self._cond:
            if self._active < self.capacity and not self._waiting:
                self._grant(who)
                return
            self._waiting[ticket] = who
            who.waits += 1
        try:
            while True:
                if while_waiting is not None:
                    while_waiting()
                with self._cond:
                    if self._active < self.capacity and self._next(time.monotonic()) == ticket:
                        del self._waiting[ticket]
                        if who.rank(time.monotonic()) < 0:
                            who.promoted += 1
                        self._grant(who)
                        self._cond.notify_all()
                        return
                    self._cond.wait(poll_s)
        except BaseException:
            with self._cond:
                self._waiting.pop(ticket, None)
                self._cond.notify_all()
            raise

    def release(self) -> None:
        with self._cond:
            self._active = max(0, self._active - 1)
            self._cond.notify_all()

    def _grant(self, who: SourcePriority) -> None:
        self._active += 1
        who.last_start = time.monotonic()

    def _next(self, now: float) -> int:
        """The waiting ticket that starts next: lowest rank, then oldest."""
        return min(self._waiting, key=lambda t: (self._waiting[t].rank(now), t))
