"""Frames turned upright as their display matrix says (phone videos, rotated cameras).

A video may store its pictures on their side and carry a display matrix (MP4/MOV
``tkhd`` matrix, or an H.264/HEVC display orientation SEI) that tells players to
turn them: FFmpeg's command line, browsers and OpenCV show such a video upright,
and so does vapipe, so that models see people standing and coordinates are those
of the picture a user watches.  Quarter turns and mirrors are applied with FFmpeg's
``transpose``, ``hflip`` and ``vflip`` filters, in the frame's own pixel format;
other angles are left as stored (with a warning, once per reader).
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["display_turn", "Upright", "TURNS", "OTHER_ANGLE"]

log = logging.getLogger("vapipe.source")

#: FFmpeg filter chain per display transform, keyed by the 2x2 matrix (rounded to -1, 0, 1) that
#: maps stored (x, y) to displayed (x, y), image axes (y down), as rows (a, c), (b, d)
TURNS: dict[tuple[int, int, int, int], tuple[tuple[str, str], ...]] = {
    (1, 0, 0, 1): (),
    (0, 1, -1, 0): (("transpose", "cclock"),),          # turned 90 degrees counter-clockwise
    (0, -1, 1, 0): (("transpose", "clock"),),           # turned 90 degrees clockwise
    (-1, 0, 0, -1): (("vflip", ""), ("hflip", "")),     # half a turn
    (-1, 0, 0, 1): (("hflip", ""),),                    # mirrored left-right
    (1, 0, 0, -1): (("hflip", ""), ("vflip", ""), ("hflip", "")),  # mirrored top-bottom
    (0, 1, 1, 0): (("transpose", "cclock_flip"),),      # transposed
    (0, -1, -1, 0): (("transpose", "clock_flip"),),     # transposed across the other diagonal
}
#: what :func:`display_turn` gives for a matrix that is not a quarter turn or mirror
OTHER_ANGLE = (0, 0, 0, 0)
# vflip only moves FFmpeg's row pointers (negative line sizes); every chain ends with a
# filter that writes rows top to bottom, as the plane views of pipeline.frame expect.


def display_turn(av_frame: Any) -> tuple[int, int, int, int] | None:
    """The key of :data:`TURNS` for ``av_frame``'s display matrix, :data:`OTHER_ANGLE` for a
    matrix that is not a quarter turn or mirror, None without one."""
    for side_data in av_frame.side_data:
        if str(side_data.type).rsplit(".", 1)[-1] == "DISPLAYMATRIX":
            m = np.frombuffer(bytes(side_data), np.int32)
            if m.size != 9:
                return None
            # FFmpeg's layout: displayed (x', y') = (a x + c y + tx, b x + d y + ty) with a, b, c,
            # d = m[0], m[1], m[3], m[4] in 16.16 fixed point
            a, b, c, d = (float(v) / 65536.0 for v in (m[0], m[1], m[3], m[4]))
            if not all(abs(v - round(v)) < 1e-3 for v in (a, b, c, d)):
                return OTHER_ANGLE
            return int(round(a)), int(round(c)), int(round(b)), int(round(d))
    return None


class Upright:
    """Turns decoded frames upright (see the module docstring).  One per reader, used by its
    decoder thread only; the returned frames are new pictures the caller owns."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._graphs: dict[tuple[Any, ...], Any] = {}
        self._warned = False

    def __call__(self, av_frame: Any) -> Any:
        turn = display_turn(av_frame)
        if turn is None or turn == (1, 0, 0, 1):
            return av_frame
        chain = TURNS.get(turn)
        if chain is None:
            if not self._warned:
                self._warned = True
                log.warning("%s: the display matrix turns the picture by an angle that is not a multiple of "
                            "90 degrees (%.1f); frames are used as stored", self.uri, av_frame.rotation)
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
