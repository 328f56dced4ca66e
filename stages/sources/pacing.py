"""Pacing of a source's units to their presentation times (:class:`Pacer`)."""

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
    """Sleeps so that units leave at their presentation times (``realtime``).  With
    ``max_gap_s``, a unit due later than that (timestamps jumped) restarts the schedule."""

    def __init__(self, enabled: bool, max_gap_s: float | None = None) -> None:
        self.enabled = enabled
        self.max_gap_s = max_gap_s
        self.start = time.monotonic()
        self.first: float | None = None

    def wait(self, ts: float | None) -> None:
        if not self.enabled or ts is None:
            return
        if self.first is None:
            self.first = ts
        delay = (ts - self.first) - (time.monotonic() - self.start)
        if self.max_gap_s is not None and (delay > self.max_gap_s or delay < -self.max_gap_s):
            self.first, self.start = ts, time.monotonic()
        elif delay > 0:
            time.sleep(delay)
