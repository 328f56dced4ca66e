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

A slot is held while its inference runs, not until its owner collects the result:
waiting cameras give back the slots of finished inferences (:meth:`RequestArbiter.watch`)
and finish their own completed requests while they wait, so a stream never idles
because the camera that used it last is busy elsewhere.  Without any priority set,
pools use no arbiter and nothing changes.
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
#: how often a waiting camera that is not next looks again (a camera falls below its
#: ``min_fps`` with time, not with an event)
RANK_CHECK_S = 0.02


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
        self._held: dict[int, Callable[[], bool] | None] = {}  # slot ticket -> "is its inference over?"
        self._waiting: dict[int, SourcePriority] = {}
        self._order = itertools.count()

    @property
    def active(self) -> int:
        return len(self._held)

    def acquire(self, who: SourcePriority, while_waiting: Callable[[], None] | None = None,
                poll_s: float = 0.001) -> int:
        """Block until ``who`` may start a request; returns the ticket of the slot it now holds
        (give it back with :meth:`release`).  Only the camera that starts next polls (every
        ``poll_s``) for inferences that ended; ``while_waiting`` runs between its checks, on
        the caller's thread (a pool finishes its own completed requests there)."""
        ticket = next(self._order)
        with self._cond:
            if len(self._held) < self.capacity and not self._waiting:
                return self._grant(who, ticket)
            self._waiting[ticket] = who
            who.waits += 1
        first = False
        try:
            while True:
                if first and while_waiting is not None:
                    while_waiting()
                with self._cond:
                    self._reclaim()
                    first = self._next(time.monotonic()) == ticket
                    if first and len(self._held) < self.capacity:
                        del self._waiting[ticket]
                        if who.rank(time.monotonic()) < 0:
                            who.promoted += 1
                        self._cond.notify_all()
                        return self._grant(who, ticket)
                    # the next to start watches for ended inferences; the others sleep until
                    # a slot is released or a start changes the order (or ranks change with time)
                    self._cond.wait(poll_s if first else RANK_CHECK_S)
        except BaseException:
            with self._cond:
                self._waiting.pop(ticket, None)
                self._cond.notify_all()
            raise

    def watch(self, ticket: int, over: Callable[[], bool]) -> None:
        """``over()`` tells (without blocking, from any thread) whether the inference started
        on slot ``ticket`` has ended: waiters then take the slot back before its owner
        collects the result."""
        with self._cond:
            if ticket in self._held:
                self._held[ticket] = over

    def release(self, ticket: int | None = None) -> None:
        """Give back slot ``ticket`` (again: no-op); None: the oldest slot held."""
        with self._cond:
            if ticket is None:
                ticket = next(iter(self._held), None)
            if ticket in self._held:
                del self._held[ticket]
                self._cond.notify_all()

    def _reclaim(self) -> None:
        """Free the slots whose inference has ended (lock held)."""
        for ticket, over in list(self._held.items()):
            if over is not None and over():
                del self._held[ticket]

    def _grant(self, who: SourcePriority, ticket: int) -> int:
        self._held[ticket] = None
        who.last_start = time.monotonic()
        return ticket

    def _next(self, now: float) -> int:
        """The waiting ticket that starts next: lowest rank, then oldest."""
        return min(self._waiting, key=lambda t: (self._waiting[t].rank(now), t))
