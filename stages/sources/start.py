"""Starting a video file at a frame other than its first (``start_frame``): the seek to a
keyframe at or before it (:func:`seek_frame`) and the numbers of the frames decoded from there
(:class:`StartPoint`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["StartPoint", "seek_frame"]

#: packets read past the keyframe to learn whether the container's times follow the presentation order
LOOK_AHEAD = 32
#: packets read from where a seek lands before that place counts as one without a keyframe
KEY_SEARCH = 1000


@dataclass
class StartPoint:
    """Numbers the frames decoded after a seek, in the order the decoder hands them out.

    With ``by_time``, a frame that has a presentation time is numbered by it: ``origin`` is frame
    0's time and a frame lasts ``ticks`` (both in the stream's time base); any other frame is
    numbered one more than the frame before it, the first one ``anchor``."""

    index: int
    origin: Fraction
    ticks: Fraction
    anchor: int
    by_time: bool
    last: int | None = None

    @property
    def time(self) -> Fraction:
        """Presentation time of frame ``index``, in the stream's time base."""
        return self.origin + self.index * self.ticks

    def before(self, pts: int | None) -> bool:
        """Number the next decoded frame (``pts``: its presentation time); True if it comes before ``index``."""
        if self.by_time and pts is not None:
            self.last = round((pts - self.origin) / self.ticks)
        else:
            self.last = self.anchor if self.last is None else self.last + 1
        return self.last < self.index


def seek_frame(container: Any, stream: Any, index: int, rate: Fraction | None,
               time_base: Fraction) -> tuple[StartPoint, list[Any]]:
    """Seek ``stream`` to a keyframe at or before frame ``index``; returns how to number the frames
    decoded from there and the packets already read from there on (to be decoded first).

    Frame 0 is the file's first keyframe (not before the stream's start time), frame n is presented
    n / ``rate`` seconds later.  A seek that lands past frame ``index``, or on a keyframe without a
    time, is made again 1, 2, 4 ... seconds earlier, and at last at the start of the file, where
    frames are counted from 0.  Frames are numbered by their times when the packets' times follow
    the presentation order (they go back and forth where frames are reordered), else counted from
    the keyframe: containers that keep no presentation times (AVI) number packets in decode order.
    """
    first = _read(container, stream, KEY_SEARCH, to_key=True)  # the file was just opened: its start
    times = [t for t in (_key_time(first), stream.start_time) if t is not None]
    origin = Fraction(max(times)) if times else Fraction(0)
    ticks = 1 / (Fraction(rate) * time_base) if rate else None
    target = origin + index * ticks if ticks is not None else origin
    back = Fraction(0)
    while True:
        at_start = ticks is None or target - back <= origin
        if at_start:
            container.seek(0)  # in AV_TIME_BASE units: before the first packet of every stream
        else:
            container.seek(math.floor(target - back), stream=stream, backward=True)
        lead = _read(container, stream, KEY_SEARCH, to_key=True)
        key_time = _key_time(lead)
        number = round((key_time - origin) / ticks) if key_time is not None and ticks is not None else None
        if at_start or (number is not None and number <= index):
            break
        back = max(2 * back, 1 / time_base)
    ahead = _read(container, stream, LOOK_AHEAD, to_key=False)
    keyed = lead[-1:] + ahead if lead and lead[-1].is_keyframe else []
    times = [p.pts for p in keyed if p.pts is not None]
    reordered = any(t < latest for t, latest in zip(times[1:], itertools.accumulate(times, max)))
    start = StartPoint(index, origin, ticks or Fraction(1), 0 if at_start or number is None else number,
                       reordered and ticks is not None)
    # packets before a keyframe cannot be decoded; at the start they are what a whole pass decodes
    return start, (lead if at_start else lead[-1:]) + ahead


def _key_time(packets: list[Any]) -> int | None:
    """Presentation time of the last packet if it is a keyframe."""
    return packets[-1].pts if packets and packets[-1].is_keyframe else None


def _read(container: Any, stream: Any, limit: int, to_key: bool) -> list[Any]:
    """Up to ``limit`` packets of ``stream`` with data; with ``to_key``, up to and with the first keyframe."""
    read: list[Any] = []
    packets = container.demux(stream)
    try:
        for packet in packets:
            if packet.size:
                read.append(packet)
            if len(read) == limit or (to_key and read and read[-1].is_keyframe):
                break
    finally:
        packets.close()  # here, not when collected: its end clears the read timeout a later read sets
    return read
