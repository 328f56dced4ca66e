"""Frames turned upright as their display matrix says (phone videos, rotated cameras).

A video may store its pictures on their side and carry a display matrix (MP4/MOV
``tkhd`` matrix, or an H.264/HEVC display orientation SEI) that tells players to
turn them: FFmpeg's command line, browsers and OpenCV show such a video upright,
and so does vapipe, so that models see people standing and coordinates are those
of the picture a user watches.  Quarter and half turns are applied with FFmpeg's
``transpose``, ``hflip`` and ``vflip`` filters, in the frame's own pixel format;
other angles are left as stored (with a warning, once per reader).

The angle is read through PyAV's ``VideoFrame.rotation`` (FFmpeg's reading of the
matrix), not through ``side_data``: PyAV keeps a frame whose ``side_data`` was read
alive (the frame and its side-data container refer to each other out of the garbage
collector's sight), which leaked most decoded frames of a run.  So a mirrored matrix
(rare: phones write turns) is applied as the turn FFmpeg reads from it, without the
mirror.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

__all__ = ["display_turn", "Upright", "TURNS"]

log = logging.getLogger("vapipe.source")

#: FFmpeg filter chain that turns a picture upright, per counter-clockwise display angle
TURNS: dict[int, tuple[tuple[str, str], ...]] = {
    90: (("transpose", "cclock"),),
    180: (("vflip", ""), ("hflip", "")),
    270: (("transpose", "clock"),),
}
# vflip only moves FFmpeg's row pointers (negative line sizes); every chain ends with a
# filter that writes rows top to bottom, as the plane views of pipeline.frame expect.


def display_turn(av_frame: Any) -> float:
    """The counter-clockwise angle in degrees, within [0, 360), by which ``av_frame`` is to be
    turned for display; 0 without a display matrix."""
    return float(av_frame.rotation or 0) % 360.0


class Upright:
    """Turns decoded frames upright (see the module docstring).  One per reader, used by its
    decoder thread only; the returned frames are new pictures the caller owns."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._graphs: dict[tuple[Any, ...], Any] = {}
        self._warned = False

    def __call__(self, av_frame: Any) -> Any:
        angle = display_turn(av_frame)
        if not angle:
            return av_frame
        chain = TURNS.get(round(angle)) if abs(angle - round(angle)) < 1e-6 else None
        if chain is None:
            if not self._warned:
                self._warned = True
                log.warning("%s: the display matrix turns the picture by %.1f degrees, not a multiple of 90; "
                            "frames are used as stored", self.uri, angle)
            return av_frame
        key = (av_frame.width, av_frame.height, av_frame.format.name, chain)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = _graph(av_frame, chain)
        graph.push(av_frame)
        out = graph.pull()
        for name in ("color_range", "colorspace"):  # kept for the colour conversion of image()
            setattr(out, name, getattr(av_frame, name))
        return out


def _graph(av_frame: Any, chain: tuple[tuple[str, str], ...]) -> Any:
    import av

    graph = av.filter.Graph()
    last = graph.add_buffer(width=av_frame.width, height=av_frame.height, format=av_frame.format.name,
                            time_base=av_frame.time_base or Fraction(1, 90000))
    # the turned picture is upright: its display matrix goes, so that nothing turns it again
    for name, args in (*chain, ("sidedata", "mode=delete:type=DISPLAYMATRIX")):
        node = graph.add(name, args) if args else graph.add(name)
        last.link_to(node)
        last = node
    sink = graph.add("buffersink")
    last.link_to(sink)
    graph.configure()
    return graph
