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
the ones it drops (:mod:`pipeline.camera`).

Slots are rationed only while there is someone to put first: while cameras of more than
one level are present on the model (waiting, or started within :data:`PRESENCE_S`).
Cameras of one level alone start at once, as without priorities, and the plugin's own
queue keeps every stream busy; rationing them too would leave a stream idle between
one inference ending and the next camera noticing.  When a camera of another level
arrives it waits for the first slot below ``capacity`` like everyone else, and from
then on the slots are rationed until it has been gone for :data:`PRESENCE_S` (or its
pool closes: :meth:`RequestArbiter.leave`).

While a more urgent camera is present, the last free slot is not given to a less urgent
one if the urgent camera is due (its next request, at the pace of its recent ones) before
an inference started now would end (the recent ones' mean length plus
:data:`BUSY_DEVIATIONS` of their mean deviations), or is late by up to a gap: it then starts on
arrival instead of waiting for a whole inference of someone else.  "Due" allows for the
camera's own irregularity: :data:`ARRIVAL_DEVIATIONS` mean deviations of its request gaps
either side of its pace.  Each arbiter measures the pace of every camera and the
length of its inferences; a camera of steady rate gives the rest of the time to the others.

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

__all__ = ["LEVELS", "PRESENCE_S", "SourcePriority", "RequestArbiter"]

#: priority names, most urgent first
LEVELS = ("high", "normal", "low")
#: how often a waiting camera that is not next looks again (a camera falls below its
#: ``min_fps`` with time, not with an event)
RANK_CHECK_S = 0.02
#: a camera counts as present on a model for this long after its last start (seconds)
PRESENCE_S = 2.0
#: weight of the newest sample in the running means of request gaps and inference lengths
PACE_WEIGHT = 0.2
#: a due camera that is late keeps the last slot reserved for this share of its gap.  A frame
#: held up upstream (the host busy) is already among the slowest; with a quarter of a gap it
#: then often found the slot taken and waited out a whole inference on top (1-2 % of the
#: urgent camera's frames at 1.5x the capacity: the frames that set its p99).  With a whole
#: gap, and the arrival and lock rules below, it waited for a slot on 6 of 1084 frames (at
#: most 4.9 ms) against 19 of 540 (up to 11 ms) before (``bench.priorities``' scene, 2-core
#: AMD EPYC Zen 4).  The slot kept free costs nothing while the camera keeps its pace, and at
#: most a gap when it stops
LATE_SHARE = 1.0
#: an inference started now may end as late as the mean length plus this many mean absolute
#: deviations (a bound on the slow ones, as TCP bounds a round trip; :class:`RunningLength`):
#: the last slot is kept that long before an urgent camera is due.  With the mean alone, the
#: slow inferences of a saturated machine made the urgent camera wait for them: its p99
#: latency at 1.5x the capacity was 1.38x its p99 at 0.5x, against 1.14x with this bound
#: (``bench.priorities``' scene, 4 interleaved rounds, 2-core AMD EPYC Zen 4)
BUSY_DEVIATIONS = 4.0
#: an urgent camera may arrive this many mean absolute deviations of its request gaps
#: earlier or later than its pace predicts (a frame delayed upstream comes late, and the one
#: after it early).  Without it, in the same scene, camera 0 still waited out an inference on
#: 1-4 % of its frames at 1.5x the capacity, each time it came outside the window; with it its
#: p99 at 1.5x was 0.94-0.96x its p99 at 0.5x, against 1.11-1.52x (two A/B runs of 6 rounds)
ARRIVAL_DEVIATIONS = 2.0


@dataclass
class RunningLength:
    """A running mean of a length of time (s) and the running mean absolute deviation from it
    (weights PACE_WEIGHT and PACE_WEIGHT / 2 on a new sample); the first sample sets the mean.
    ``bound(k)``: the mean plus ``k`` deviations, a length the slow samples rarely exceed."""

    mean: float = 0.0
    dev: float = 0.0

    def add(self, sample: float) -> None:
        if self.mean == 0.0:
            self.mean = sample
            return
        self.dev += PACE_WEIGHT / 2 * (abs(sample - self.mean) - self.dev)
        self.mean += PACE_WEIGHT * (sample - self.mean)

    def bound(self, deviations: float) -> float:
        return self.mean + deviations * self.dev


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
    """At most ``capacity`` requests started on one compiled model while cameras of several
    levels are present; waiters start in priority order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self._cond = threading.Condition()
        self._held: dict[int, Callable[[], bool] | None] = {}  # slot ticket -> "is its inference over?"
        self._waiting: dict[int, SourcePriority] = {}
        self._present: dict[int, SourcePriority] = {}  # id(camera) -> camera, pruned by _contended
        self._pace: dict[int, tuple[float, RunningLength]] = {}  # id(camera) -> (last request, its gaps)
        self._started_at: dict[int, float] = {}        # slot ticket -> monotonic start
        self._busy = RunningLength()                    # inference lengths
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
            now = time.monotonic()
            self._arrive(who, now)
            if self._may_start(who, now, first=self._ahead_of_waiters(who, now)):
                return self._grant(who, ticket)
            self._waiting[ticket] = who
            who.waits += 1
        first = False
        try:
            while True:
                ended: list[int] = []
                if first:
                    if while_waiting is not None:
                        while_waiting()
                    ended = self._ended()
                with self._cond:
                    now = time.monotonic()
                    for done in ended:
                        if done in self._held:
                            self._end(done, now)
                    was_first, first = first, self._next(now) == ticket
                    if self._may_start(who, now, first):
                        del self._waiting[ticket]
                        if first and who.rank(now) < 0:
                            who.promoted += 1
                        self._cond.notify_all()
                        return self._grant(who, ticket)
                    if first and not was_first:
                        continue   # next from now on: look for ended inferences before sleeping
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
                self._end(ticket, time.monotonic())
                self._cond.notify_all()

    def leave(self, who: SourcePriority) -> None:
        """``who`` starts nothing more on this model (its pool closed): it stops counting as
        present at once rather than :data:`PRESENCE_S` after its last start."""
        with self._cond:
            self._pace.pop(id(who), None)
            if self._present.pop(id(who), None) is not None:
                self._cond.notify_all()

    def _arrive(self, who: SourcePriority, now: float) -> None:
        """``who`` asks for a slot now: present, and its pace updated (lock held)."""
        self._present[id(who)] = who
        last, gaps = self._pace.get(id(who), (None, RunningLength()))
        if last is not None:
            gaps.add(now - last)
        self._pace[id(who)] = (now, gaps)

    def _may_start(self, who: SourcePriority, now: float, first: bool) -> bool:
        """Whether ``who`` (next in line or not) may start now (lock held)."""
        if not self._contended(who, now):
            return True
        if not first or len(self._held) >= self.capacity:
            return False
        return len(self._held) < self.capacity - 1 or not self._reserved(who, now)

    def _reserved(self, who: SourcePriority, now: float) -> bool:
        """Whether a camera more urgent than ``who`` is due before an inference started now
        would end (or is late by up to LATE_SHARE of its gap): the last slot is kept for it
        (lock held)."""
        rank = who.rank(now)
        for key, cam in self._present.items():
            pace = self._pace.get(key)
            if pace is None or pace[1].mean <= 0.0 or cam.rank(now) >= rank:
                continue
            last, gaps = pace
            due = last + gaps.mean
            jitter = ARRIVAL_DEVIATIONS * gaps.dev   # its own irregularity, either side
            slow_end = self._busy.bound(BUSY_DEVIATIONS)   # of an inference started now
            if due - slow_end - jitter <= now <= due + LATE_SHARE * gaps.mean + jitter:
                return True
        return False

    def _contended(self, who: SourcePriority, now: float) -> bool:
        """Whether cameras of more than one level are present: ``who`` (asking now), the
        waiting ones and those that started within PRESENCE_S (lock held; forgets the rest)."""
        waiting = {id(w) for w in self._waiting.values()}
        levels = {who.level}
        for key, cam in list(self._present.items()):
            if key in waiting or now - cam.last_start <= PRESENCE_S:
                levels.add(cam.level)
            elif cam is not who:
                del self._present[key]
                self._pace.pop(key, None)
        return len(levels) > 1

    def _ended(self) -> list[int]:
        """The held slots whose inference has ended, asked without the lock: ``over()`` calls
        into the runtime, which lets go of the GIL, and under the lock every camera that wants
        the lock meanwhile would wait until this thread had the GIL back (waits of 2-7 ms for
        an urgent camera that found its slot free, at 1.5x the capacity of a 2-core machine)."""
        with self._cond:
            held = list(self._held.items())
        return [ticket for ticket, over in held if over is not None and over()]

    def _end(self, ticket: int, now: float) -> None:
        """Slot ``ticket`` is free; its inference length goes into the running one (lock held)."""
        del self._held[ticket]
        self._busy.add(now - self._started_at.pop(ticket, now))

    def _grant(self, who: SourcePriority, ticket: int) -> int:
        self._held[ticket] = None
        who.last_start = self._started_at[ticket] = time.monotonic()
        return ticket

    def _ahead_of_waiters(self, who: SourcePriority, now: float) -> bool:
        """Whether ``who``, arriving now, starts before every waiting camera (lock held).  An
        urgent camera that finds the slot kept for it starts on arrival: queued first, it would
        wait until the lock came round to it again past the waiters woken with it: 1-6 ms on a
        busy 2-core machine, on 2-4 % of its frames at 1.5x the capacity."""
        rank = who.rank(now)
        return all(rank < w.rank(now) for w in self._waiting.values())

    def _next(self, now: float) -> int:
        """The waiting ticket that starts next: lowest rank, then oldest."""
        return min(self._waiting, key=lambda t: (self._waiting[t].rank(now), t))
