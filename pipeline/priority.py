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
  (+11 %); CPU use went from 86 % to 92 % of both cores;
* ``persons``, 1 camera: 287 -> 301 (+5 %);
* ``faces``, 1 camera, decoder-bound: 258 -> 260 (the queue is never full, nothing
  changes); with its decoder always at nice 10 it ran at 158-199 against 235-271.

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

from .queues import BoundedQueue

__all__ = ["NICE_WHILE_AHEAD", "YieldWhileAhead", "thread_nice"]

log = logging.getLogger("vapipe")

#: nice value of a producer thread while its output queue stays full (0 = never lowered)
NICE_WHILE_AHEAD = 10


def thread_nice(native_id: int | None = None) -> int:
    """Nice value of a thread (default: the calling thread); 0 where threads have none."""
    if not sys.platform.startswith("linux"):
        return 0
    return os.getpriority(os.PRIO_PROCESS, native_id if native_id is not None else threading.get_native_id())


class YieldWhileAhead:
    """Priority rule for the thread that fills ``queue``; call :meth:`after_put` on that thread.

    Every ``window`` puts it looks at the share of them that found ``queue`` full:
    at least ``ahead`` -> nice ``nice``; at most ``behind`` -> back to the thread's
    starting nice value (when allowed).  ``nice`` 0 disables the rule.
    """

    def __init__(self, queue: BoundedQueue, nice: int = NICE_WHILE_AHEAD, window: int = 32,
                 ahead: float = 0.5, behind: float = 0.1) -> None:
        if window < 1 or not 0.0 <= behind < ahead <= 1.0:
            raise ValueError(f"need window >= 1 and 0 <= behind < ahead <= 1, got {window}, {behind}, {ahead}")
        self.queue = queue
        self.nice = max(0, min(19, int(nice))) if sys.platform.startswith("linux") else 0
        self.window = window
        self.ahead = ahead
        self.behind = behind
        self.lowered = False
        self.changes = 0          # priority changes made
        self.stuck = False        # lowered, and the process may not raise it again
        self._tid: int | None = None
        self._base = 0
        self._puts = 0
        self._full_at_start = queue.full_puts

    def after_put(self) -> None:
        if not self.nice:
            return
        self._puts += 1
        if self._puts < self.window:
            return
        share = (self.queue.full_puts - self._full_at_start) / self._puts
        self._puts, self._full_at_start = 0, self.queue.full_puts
        if not self.lowered and share >= self.ahead:
            self._set(True)
        elif self.lowered and share <= self.behind and not self.stuck:
            self._set(False)

    def _set(self, lower: bool) -> None:
        if self._tid is None:
            self._tid = threading.get_native_id()
            self._base = thread_nice(self._tid)
        value = max(self._base, self.nice) if lower else self._base
        try:
            os.setpriority(os.PRIO_PROCESS, self._tid, value)
        except PermissionError:
            self.stuck = True
            log.debug("thread %d may not raise its priority back to nice %d", self._tid, value)
            return
        except OSError as exc:  # pragma: no cover - e.g. a sandbox without setpriority
            log.debug("setpriority(%d, %d) failed: %s; not changing priorities", self._tid, value, exc)
            self.nice = 0
            return
        self.lowered = lower
        self.changes += 1
