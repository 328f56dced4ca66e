"""Pacing of a source's units to their timestamps (:class:`Pacer`)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Pacer", "packet_time"]


def packet_time(packet: Any) -> float | None:
    """A packet's own decode time in seconds, else its presentation time (no loop or reconnect
    offset): decode times increase in reading order, B-frames' presentation times do not."""
    ts = packet.dts if packet.dts is not None else packet.pts
    return None if ts is None or packet.time_base is None else float(ts * packet.time_base)


class Pacer:
    """Sleeps so that units leave at their times (``realtime``), which increase in reading order.
    A time that goes back, or ahead of the one before by more than ``max_gap_s`` and ten frame
    intervals (timestamps reset or jumped: a discontinuity), starts the schedule again one frame
    interval (at ``frame_rate``) after the unit before.  With ``catch_up=False`` a schedule fallen
    behind by more than ``max_gap_s`` (a stalled stream) starts again too, instead of sending the
    late units at once."""

    def __init__(self, enabled: bool, frame_rate: float | None = None, max_gap_s: float = 2.0,
                 catch_up: bool = True) -> None:
        self.enabled = enabled
        self.interval = 1 / frame_rate if frame_rate else 0.0
        self.max_gap_s = max_gap_s
        self.max_step = max(max_gap_s, 10 * self.interval)
        self.catch_up = catch_up
        self.start = time.monotonic()
        self.first: float | None = None
        self.last = 0.0

    def wait(self, ts: float | None) -> None:
        if not self.enabled or ts is None:
            return
        if self.first is None:
            self.first = ts
        elif not 0 <= ts - self.last <= self.max_step:
            self.start += self.last - self.first + self.interval
            self.first = ts
        self.last = ts
        delay = (ts - self.first) - (time.monotonic() - self.start)
        if not self.catch_up and delay < -self.max_gap_s:
            self.first, self.start = ts, time.monotonic()
        elif delay > 0:
            time.sleep(delay)
