"""Producer threads yield the CPU to the bottleneck downstream while they are ahead of it.

On a CPU-only machine the decoders and the inference threads share the cores.  When
inference is the bottleneck, every decoder's output queue is full most of the time,
yet the decoders still run in bursts (a frame is taken, the next is decoded) and the
kernel's fair scheduler gives each runnable thread an equal share: four decoders and
one inference thread on two cores leave inference 2/5 of a core at those moments,
and a core idle later, when every decoder waits on a full queue.  Run at a lower
priority while ahead, a decoder takes only the CPU inference leaves free, which is
all it needs: its queue stays full.  When the decoder is the bottleneck its queue is
empty, it stays at normal priority (lowering it there costs throughput: the kernel
balances cores by weight and leaves a low-weight decoder sharing a core with a busy
thread while the other core idles).

Measured on the 2-core development machine (``persons`` and ``faces`` on the 1080p
benchmark clips, 4 interleaved runs each, median FPS):

* ``persons``, 4 cameras: 273 with decoders at normal priority, 303 with this rule
  (+11 %); CPU use went from 86 % to 92 % of both cores (summing the cameras' own
  rates, which the unfairness below inflates);
* ``persons``, 1 camera: 287 -> 301 (+5 %);
* ``faces``, 1 camera, decoder-bound: 258 -> 260 (the queue is never full, nothing
  changes); with its decoder always at nice 10 it ran at 158-199 against 235-271.

The decoders of a run are lowered and raised together (:class:`NiceGroup`).  Each deciding
alone, the one left at normal priority while the others were lowered took the CPU they
left, and its camera outran them: ``persons`` with 4 cameras on the 1080p clip, 75
frames each, on a 2-core AMD EPYC (Zen 4), decode-bound there, gave the cameras' FPS a
spread (fastest minus slowest over fastest) of 0.07-0.32, median 0.11 in 14 runs, and 0.01-0.09,
median 0.06, with the group, at the same frames per second over the whole run (paired
ratio 0.98).  Where decoding and inference cost about the same, the group went down in
the start-up window and up in the next, then again (0.6, 0.02, 0.52, 0.04 of the puts
found the queues full, on 150 frames a camera): the start-up window is not judged, and a lowering undone at once
waits longer before the next; with both, the run is as fast as with decoders never lowered
and as with every runtime's defaults (paired ratios 0.98 and 0.99 over 6 rounds).

A decoder with more than one thread decodes on FFmpeg's frame threads, not on its own:
those are its helpers (:meth:`YieldWhileAhead.add_helpers`) and are lowered and raised with
it, the new ones of each new decoder too (a reconnect, a file's loop).  A thread takes its
nice value from the thread that starts it, once; left at nice 0, the frame threads of a
decoder that is ahead took their CPU from inference (``persons`` at 1080p on a 2-core AMD
EPYC Zen 5 with three frame threads: 0.936 times the rate of two, against 1.009 with the
frame threads lowered too; 7 interleaved rounds each).

Thread nice values are per thread on Linux only; elsewhere this is a no-op.  The
priority goes back up when the producer falls behind, if the process may raise it
(root, ``CAP_SYS_NICE`` or ``RLIMIT_NICE``); otherwise the thread stays lowered.
With the kernel's autogroups or in a container's cgroup the nice value only weighs the
process's own threads against each other.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Iterable

from .queues import BoundedQueue
from .thread_cpu import thread_cpu_s

__all__ = ["NICE_WHILE_AHEAD", "NiceGroup", "YieldWhileAhead", "thread_nice"]

log = logging.getLogger("vapipe")

#: nice value of a producer thread while its output queue stays full (0 = never lowered)
NICE_WHILE_AHEAD = 10
#: most windows in a row that must find the queues full before a group is lowered again
MAX_HOLD = 8


def thread_nice(native_id: int | None = None) -> int:
    """Nice value of a thread (default: the calling thread); 0 where threads have none."""
    if not sys.platform.startswith("linux"):
        return 0
    return os.getpriority(os.PRIO_PROCESS, native_id if native_id is not None else threading.get_native_id())


class NiceGroup:
    """Producer threads that share the cores and should share them evenly (the decoders of
    one run): they are lowered to ``nice`` together, when at least ``ahead`` of their puts,
    pooled over the group, found their queue full, and raised together when at most
    ``behind`` did.  Every ``window`` puts of each member (``window`` times the members, in
    all) the group decides.  Members join with :meth:`join` and leave when their thread ends.

    A decoder deciding alone is lowered at its own moment, and one left at normal priority
    among lowered ones takes most of the CPU they leave: its camera then outruns the others.

    The first window only fills the queues while the models start, and says nothing of
    who is ahead: it is not judged.  A lowering that the next window already undoes (the
    decoders fell behind as soon as they yielded) doubles the windows in a row, up to
    ``MAX_HOLD``, that must find the queues full before the next one: where decoding and
    inference are about as costly, the group would otherwise go down and up every window.
    """

    def __init__(self, nice: int = NICE_WHILE_AHEAD, window: int = 32, ahead: float = 0.5,
                 behind: float = 0.1) -> None:
        if window < 1 or not 0.0 <= behind < ahead <= 1.0:
            raise ValueError(f"need window >= 1 and 0 <= behind < ahead <= 1, got {window}, {behind}, {ahead}")
        self.nice = max(0, min(19, int(nice))) if sys.platform.startswith("linux") else 0
        self.window = window
        self.ahead = ahead
        self.behind = behind
        self.lowered = False
        self.stuck = False        # lowered, and the process may not raise it again
        self._lock = threading.Lock()
        self._members: list[YieldWhileAhead] = []
        self._puts = 0
        self._full = 0
        self._warm = True         # the first window is the start-up's
        self._need = 1            # windows in a row at or above ``ahead`` that lower the group
        self._run = 0             # such windows so far
        self._since = 0           # windows since the last change

    def join(self, queue: BoundedQueue) -> "YieldWhileAhead":
        """The rule for the thread that fills ``queue``."""
        return YieldWhileAhead(queue, group=self)

    def _put(self, member: "YieldWhileAhead", full: int) -> None:
        with self._lock:
            if member.tid is None:
                member.tid = threading.get_native_id()
                member.base = thread_nice(member.tid)
                self._members.append(member)
                if self.lowered:   # a decoder that joins a lowered group starts lowered
                    self._apply([member], True)
            self._puts += 1
            self._full += full
            if self._puts < self.window * len(self._members):
                return
            share = self._full / self._puts
            self._puts = self._full = 0
            self._judge(share)

    def _judge(self, share: float) -> None:
        """One window's share of puts that found their queue full."""
        self._since += 1
        if self._warm:
            self._warm = False
        elif not self.lowered:
            self._run = self._run + 1 if share >= self.ahead else 0
            if self._run >= self._need and self._set(True):
                self._run = self._since = 0
        elif share <= self.behind and not self.stuck:
            undone_at_once = self._since <= 1
            if self._set(False):
                self._need = min(MAX_HOLD, self._need * 2) if undone_at_once else 1
                self._since = 0

    def _leave(self, member: "YieldWhileAhead") -> None:
        with self._lock:
            if member in self._members:
                self._members.remove(member)

    def _set(self, lower: bool) -> bool:
        if not self._apply(self._members, lower):
            return False
        self.lowered = lower
        return True

    def _apply(self, members: list["YieldWhileAhead"], lower: bool) -> bool:
        """Set ``members``' threads (and their helpers) lowered or back to their own nice
        value; False if the process may not (raising needs the right to: the group then
        stays lowered)."""
        for m in members:
            ok = self._set_nice(m.tid, m.base, lower)
            if ok is False:
                return False
            if ok:
                m.changes += 1
            for tid, base in list(m.helpers.items()):
                done = self._set_nice(tid, base, lower)
                if done is False:
                    return False
                if done is None:  # ended with its decoder (a reconnect, a loop)
                    del m.helpers[tid]
        return True

    def _set_nice(self, tid: int | None, base: int, lower: bool) -> bool | None:
        """True when set, None when the thread has ended, False when the process may not."""
        value = max(base, self.nice) if lower else base
        try:
            os.setpriority(os.PRIO_PROCESS, tid, value)  # type: ignore[arg-type]
        except PermissionError:
            self.stuck = True
            log.debug("thread %s may not raise its priority back to nice %d", tid, value)
            return False
        except ProcessLookupError:  # the thread has just ended
            return None
        except OSError as exc:  # pragma: no cover - e.g. a sandbox without setpriority
            log.debug("setpriority(%s, %d) failed: %s; not changing priorities", tid, value, exc)
            self.nice = 0
            return False
        return True

    def _add_helpers(self, member: "YieldWhileAhead", tids: Iterable[int]) -> None:
        with self._lock:
            # helpers of a decoder that was replaced have ended, and their ids may come back
            member.helpers = {t: b for t, b in member.helpers.items() if thread_cpu_s(t) is not None}
            new = {}
            for tid in tids:
                if tid != member.tid and tid not in member.helpers:
                    try:
                        new[tid] = thread_nice(tid)
                    except OSError:  # it has just ended
                        continue
            member.helpers.update(new)
            if self.lowered:  # they join a lowered group lowered, as their thread is
                for tid, base in new.items():
                    self._set_nice(tid, base, True)


class YieldWhileAhead:
    """Priority rule for the thread that fills ``queue``; call :meth:`after_put` on that
    thread after each put, and :meth:`leave` when it stops.

    Alone (no ``group``) it decides for its own thread as a :class:`NiceGroup` of one,
    made with ``nice``, ``window``, ``ahead`` and ``behind``: nice ``nice`` while at least
    ``ahead`` of ``window`` puts find ``queue`` full, back to the thread's starting nice
    value (when allowed) once at most ``behind`` do.  ``nice`` 0 disables the rule.
    """

    def __init__(self, queue: BoundedQueue, nice: int = NICE_WHILE_AHEAD, window: int = 32,
                 ahead: float = 0.5, behind: float = 0.1, group: NiceGroup | None = None) -> None:
        self.group = group if group is not None else NiceGroup(nice, window, ahead, behind)
        self.queue = queue
        self.changes = 0          # priority changes made to this thread
        self.tid: int | None = None
        self.base = 0             # the thread's nice value when it joined
        #: threads that do this thread's work (FFmpeg's frame threads of its decoder) and go
        #: down and up with it: native id -> their nice value when added
        self.helpers: dict[int, int] = {}
        self._full_seen = queue.full_puts

    @property
    def lowered(self) -> bool:
        return self.group.lowered

    @property
    def stuck(self) -> bool:
        return self.group.stuck

    def after_put(self) -> None:
        if not self.group.nice:
            return
        full, self._full_seen = self.queue.full_puts - self._full_seen, self.queue.full_puts
        self.group._put(self, full)

    def add_helpers(self, tids: Iterable[int]) -> None:
        """Threads that work for this one (a decoder's FFmpeg frame threads: with ``threads``
        > 1 the decoding runs on them, not on the thread that calls the decoder); they are
        lowered and raised with it from now on, and lowered at once if the group is."""
        self.group._add_helpers(self, tids)

    def leave(self) -> None:
        """The thread stops putting: the group decides without it."""
        self.group._leave(self)
