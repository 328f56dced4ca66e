"""Output timestamps of a video file (:class:`OutputClock`): from 0, never repeating or going back.

With frame timestamps (``pts``/``time_base``) the output follows them; without, it follows
``seq`` at the nominal rate.  A repeated timestamp, or one at most a frame interval early
(jitter), is moved one tick after the previous frame; a jump back by more than a frame interval
(a looping or restarted source) continues one frame interval after the previous frame.  A frame
interval is the median of the latest intervals between timestamps; without them, the nominal one.
The last frame is shown for one frame interval.
"""

from __future__ import annotations

import logging
from collections import deque
from fractions import Fraction
from statistics import median_low
from typing import Any

from pipeline.frame import Frame

__all__ = ["OutputClock", "frame_timing", "set_frame_timing"]

log = logging.getLogger(__name__)

_RECENT = 9  # intervals between timestamps that give the frame interval


class OutputClock:
    """Timestamps in ticks of ``time_base`` for the frames of one file, the first being ``first``;
    ``fps`` is the nominal rate (frames without timestamps; the frame interval until timestamps
    show one).  :attr:`last_pts` is the latest timestamp written: the caller sets it once the
    frame is taken (and puts it back if encoding fails)."""

    def __init__(self, first: Frame, time_base: Fraction, fps: float, name: str = "encode") -> None:
        self.time_base = time_base
        self.fps = fps
        self.name = name
        #: one nominal frame interval in ticks (at least 1)
        self.step = max(1, round(1 / (Fraction(fps) * time_base)))
        self.use_ts = first.pts is not None and first.time_base is not None
        self._t0 = Fraction(first.pts) * Fraction(first.time_base) if self.use_ts else Fraction(0)  # type: ignore[arg-type]
        self._seq0 = first.seq
        self._offset = 0  # ticks added after source restarts
        self.last_pts: int | None = None
        self._last_seq: int | None = None  # of the latest frame timed by its seq (no timestamps)
        self._repeat_logged = False
        self._intervals: deque[int] = deque(maxlen=_RECENT)  # between the latest timestamps given
        #: one frame interval in ticks (at least 1): the median of the latest intervals between
        #: timestamps, else (without timestamps, or before the second frame) :attr:`step`
        self.interval = self.step

    def next_pts(self, frame: Frame) -> int:
        """The timestamp for ``frame``, after :attr:`last_pts`."""
        step = self.step
        if self.use_ts and frame.pts is not None and frame.time_base is not None:
            t = Fraction(frame.pts) * Fraction(frame.time_base) - self._t0
            pts = round(t / self.time_base) + self._offset
        elif self.use_ts:  # timestamps stopped: one nominal interval later
            pts = (self.last_pts if self.last_pts is not None else -step) + step
        elif self._last_seq is not None and frame.seq <= self._last_seq and self.last_pts is not None:
            # frames built by hand that all keep seq 0: one nominal interval each, not one tick
            if not self._repeat_logged:
                self._repeat_logged = True
                log.warning("%s: frames without timestamps repeat seq %d; each is written %s s after the last "
                            "(number them: Frame.from_image(image, source_id, seq))", self.name, frame.seq,
                            round(1 / self.fps, 4))
            pts = self.last_pts + step
        else:
            pts = round(Fraction(frame.seq - self._seq0) / Fraction(self.fps) / self.time_base)
        if not self.use_ts:
            self._last_seq = frame.seq
        last = self.last_pts
        if last is not None and pts <= last:
            interval = self.interval
            if self.use_ts and last - pts > interval:
                self._offset += last + interval - pts
                pts = last + interval
            else:
                pts = last + 1
        if self.use_ts and last is not None:
            self._intervals.append(pts - last)
            self.interval = median_low(self._intervals)
        return pts


def frame_timing(vframe: Any) -> tuple[Any, Any, Any]:
    """An ``av.VideoFrame``'s (pts, time_base, duration), to put back after encoding a borrowed frame."""
    return vframe.pts, vframe.time_base, getattr(vframe, "duration", None)


def set_frame_timing(vframe: Any, timing: tuple[Any, Any, Any]) -> None:
    vframe.pts, time_base, duration = timing
    if time_base is not None:  # PyAV cannot set None back
        vframe.time_base = time_base
    if duration is not None and hasattr(vframe, "duration"):  # PyAV >= 14
        vframe.duration = duration
