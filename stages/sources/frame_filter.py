"""Decoded frames made fit for models: deinterlaced, square-pixelled and turned upright, by
FFmpeg's filters.

* **Deinterlacing.**  A frame of interlaced video holds two fields captured 1/50 or 1/60 s
  apart; anything that moved shows combed edges, which detectors read badly.  Frames the
  decoder flags as interlaced (``deinterlace: auto``), or all (``on``), go through FFmpeg's
  ``bwdif`` (one frame out per frame in, each field interpolated from its neighbours in time
  and space).  It needs the next frame, so once a stream has shown an interlaced frame every
  later frame goes through the same filter (progressive ones unchanged) and the output lags by
  one frame until the stream is flushed.
* **Square pixels.**  Anamorphic video stores pictures narrower or wider than they are shown
  (a sample aspect ratio other than 1:1: DVB 720x576 at 16:9, HDV 1440x1080, NTSC 720x480):
  players stretch it, and so does this filter (FFmpeg's ``scale``, the width times the ratio,
  rounded to even), so that models see people in their proportions.
* **Turning upright.**  A video may store its pictures on their side and carry a display
  matrix (MP4/MOV ``tkhd``, or an H.264/HEVC display orientation SEI) that tells players to turn
  them (phone videos): FFmpeg's command line, browsers and OpenCV show it upright, and so does
  this filter (``transpose``, ``vflip``+``hflip``), so that models see people standing and
  coordinates are those of the picture a user watches; other angles than quarter and half turns
  are used as stored, with a warning.  The angle is read through PyAV's
  ``VideoFrame.rotation`` (FFmpeg's reading of the matrix), not through ``side_data``: PyAV
  keeps a frame whose ``side_data`` was read alive (the frame and its side-data container refer
  to each other out of the garbage collector's sight), which leaked most decoded frames of a
  run.  So a mirrored matrix (rare: phones write turns) is applied as its turn, without the
  mirror.

All run in the frame's own pixel format, in one filter graph per picture format, in that order
(fields are rows of the stored picture).
"""

from __future__ import annotations

import logging
from collections import deque
from fractions import Fraction
from typing import Any, Literal

from pipeline.geometry import nearest_even

__all__ = ["FrameFilter", "Deinterlace", "TURNS"]

log = logging.getLogger("vapipe.source")

Deinterlace = Literal["auto", "on", "off"]

#: FFmpeg filter chain that turns a picture upright, per counter-clockwise display angle
TURNS: dict[int, tuple[tuple[str, str], ...]] = {
    90: (("transpose", "cclock"),),
    180: (("vflip", ""), ("hflip", "")),
    270: (("transpose", "clock"),),
}
# vflip only moves FFmpeg's row pointers (negative line sizes); every chain ends with a
# filter that writes rows top to bottom, as the plane views of pipeline.frame expect.


class FrameFilter:
    """Filters one stream's decoded frames; used by its decoder thread only.

    :meth:`push` takes a decoded frame and its presentation timestamp (in ``time_base``) and
    returns the (frame, pts) pairs ready, in order; :meth:`flush` returns those still held at
    the end of the stream.  Returned frames are new pictures the caller owns, or the pushed
    frame itself when nothing applies to it."""

    def __init__(self, uri: str, time_base: Fraction, autorotate: bool = True,
                 deinterlace: Deinterlace = "auto", sample_aspect: Fraction | None = None) -> None:
        self.uri = uri
        self.time_base = time_base
        self.autorotate = autorotate
        #: the stream's sample aspect ratio when it is not 1:1 (pictures are stretched by it)
        self.sample_aspect = sample_aspect if sample_aspect and sample_aspect != 1 else None
        self.deinterlace = deinterlace
        self._interlaced = deinterlace == "on"   # the stream has shown an interlaced frame
        self._graph: Any = None
        self._key: tuple[Any, ...] | None = None
        self._warned = False
        self._colour: tuple[Any, Any] | None = None  # colour range and space of the frames pushed
        # timestamps of the frames in the graph, oldest first: one frame comes out per frame in
        # (bwdif's output counts in half the time base; the caller's timestamps are kept)
        self._held: deque[int] = deque()

    def push(self, av_frame: Any, pts: int) -> list[tuple[Any, int]]:
        if self.deinterlace == "auto" and not self._interlaced and av_frame.interlaced_frame:
            self._interlaced = True
            log.info("%s: interlaced video: frames are deinterlaced (bwdif)", self.uri)
        angle = (av_frame.rotation or 0) % 360 if self.autorotate else 0
        if not (angle or self._interlaced or self.sample_aspect or self._graph is not None):
            return [(av_frame, pts)]  # nothing applies, nothing held
        out: list[tuple[Any, int]] = []
        key = (av_frame.width, av_frame.height, av_frame.format.name, angle, self._interlaced)
        if key != self._key:
            out += self.flush()  # the frames the previous graph still holds come first
            chain = self._chain(av_frame, angle)
            if not chain:
                return out + [(av_frame, pts)]
            self._graph, self._key = _graph(av_frame, chain, self.time_base), key
        av_frame.pts, av_frame.time_base = pts, self.time_base
        self._held.append(pts)
        self._colour = (av_frame.color_range, av_frame.colorspace)
        self._graph.push(av_frame)
        return out + self._pull(self._graph)

    def flush(self) -> list[tuple[Any, int]]:
        """The frames the filters still hold (end of stream, or a new picture format)."""
        if self._graph is None:
            return []
        graph, self._graph, self._key = self._graph, None, None
        graph.push(None)
        return self._pull(graph)

    def _chain(self, av_frame: Any, angle: int) -> tuple[tuple[str, str], ...]:
        """The filters for frames like ``av_frame`` shown turned by ``angle``, in order: fields are
        rows of the stored picture, so deinterlacing comes first."""
        chain: tuple[tuple[str, str], ...] = (("bwdif", self._bwdif_args()),) if self._interlaced else ()
        if self.sample_aspect is not None:
            width = nearest_even(av_frame.width * self.sample_aspect)
            chain += (("scale", f"w={width}:h={av_frame.height}"), ("setsar", "1"))
        turn = TURNS.get(angle, ())
        if angle and not turn and not self._warned:
            self._warned = True
            log.warning("%s: the display matrix turns the picture by %d degrees, not a multiple of 90; "
                        "frames are used as stored", self.uri, angle)
        return chain + turn

    def _bwdif_args(self) -> str:
        # send_frame: one frame per frame; deint: only flagged frames in auto mode
        return "mode=send_frame:parity=auto:deint=" + ("all" if self.deinterlace == "on" else "interlaced")

    def _pull(self, graph: Any) -> list[tuple[Any, int]]:
        import av

        out = []
        while True:
            try:
                frame = graph.pull()
            except (av.error.BlockingIOError, av.error.EOFError):
                return out
            if self._colour is not None:  # kept for the colour conversion of image()
                frame.color_range, frame.colorspace = self._colour
            out.append((frame, self._held.popleft()))


def _graph(av_frame: Any, chain: tuple[tuple[str, str], ...], time_base: Fraction) -> Any:
    import av

    graph = av.filter.Graph()
    last = graph.add_buffer(width=av_frame.width, height=av_frame.height, format=av_frame.format.name,
                            time_base=time_base)
    # turned pictures are upright: their display matrix goes, so that nothing turns them again
    for name, args in (*chain, ("sidedata", "mode=delete:type=DISPLAYMATRIX")):
        node = graph.add(name, args) if args else graph.add(name)
        last.link_to(node)
        last = node
    sink = graph.add("buffersink")
    last.link_to(sink)
    graph.configure()
    return graph
