"""Short clips for tests: decoder frames of a video, and frames re-encoded as H.264."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av

__all__ = ["decode", "encode"]


def decode(path: Path, first: int, count: int) -> list[Any]:
    """Frames ``first`` .. ``first + count - 1`` of ``path`` (PyAV frames, the decoder's format)."""
    frames = []
    with av.open(str(path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i >= first + count:
                break
            if i >= first:
                frames.append(frame)
    return frames


def encode(frames: list[Any], path: Path, size: tuple[int, int] | None = None, rate: int = 10) -> Path:
    """``frames`` as an H.264 (libx264, yuv420p) file at ``path``, scaled to ``size`` (width, height)."""
    width, height = size or (frames[0].width, frames[0].height)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"crf": "18", "preset": "veryfast"}
        for frame in frames:
            scaled = frame.reformat(width=width, height=height, format="yuv420p")
            scaled.pts = None
            for packet in stream.encode(scaled):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path
