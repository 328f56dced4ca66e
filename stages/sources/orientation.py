"""Frames turned upright as their display matrix says (phone videos, rotated cameras).

A video may store its pictures on their side and carry a display matrix (MP4/MOV
``tkhd`` matrix, or an H.264/HEVC display orientation SEI) that tells players to
turn them: FFmpeg's command line, browsers and OpenCV show such a video upright,
and so does vapipe, so that models see people standing and coordinates are those
of the picture a user watches.  Quarter and half turns are applied with FFmpeg's
``transpose``, ``hflip`` and ``vflip`` filters (:mod:`.frame_filter`), in the
frame's own pixel format; other angles are left as stored, with a warning.

The angle is read through PyAV's ``VideoFrame.rotation`` (FFmpeg's reading of the
matrix), not through ``side_data``: PyAV keeps a frame whose ``side_data`` was read
alive (the frame and its side-data container refer to each other out of the garbage
collector's sight), which leaked most decoded frames of a run.  So a mirrored matrix
(rare: phones write turns) is applied as the turn FFmpeg reads from it, without the
mirror.
"""

from __future__ import annotations

from typing import Any

__all__ = ["display_turn", "TURNS"]

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
