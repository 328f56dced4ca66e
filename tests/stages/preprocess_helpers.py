"""Inputs and a model-free detector for the preprocess tests.

Clips are written losslessly (libx264, qp 0, yuv420p), so a clip transformed with
FFmpeg's own filters decodes to exactly the transformed planes of the original.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

import av
import numpy as np

from pipeline.frame import Detections, Frame
from pipeline.stage import Stage

SQUARE = 24  # side of the generated clip's bright square, pixels


def write_lossless(path: Path, frames: Iterable[av.VideoFrame], rate: Fraction = Fraction(10)) -> Path:
    """Encode ``frames`` (yuv420p, even sizes) to ``path`` with libx264 in lossless mode."""
    with av.open(str(path), "w") as out:
        stream = None
        for i, frame in enumerate(frames):
            if stream is None:
                stream = out.add_stream("libx264", rate=rate)
                stream.width, stream.height, stream.pix_fmt = frame.width, frame.height, "yuv420p"
                stream.options = {"qp": "0", "preset": "ultrafast"}
            frame = frame.reformat(format="yuv420p")
            frame.pts, frame.time_base = i, 1 / rate
            out.mux(stream.encode(frame))
        if stream is not None:
            out.mux(stream.encode(None))
    return path


def decoded(path: Path, limit: int | None = None) -> Iterator[av.VideoFrame]:
    with av.open(str(path)) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if limit is not None and i >= limit:
                return
            yield frame


def ffmpeg_filtered(frames: Iterable[av.VideoFrame], chain: list[tuple[str, str]]) -> Iterator[av.VideoFrame]:
    """``frames`` through FFmpeg's filters (libavfilter), e.g. [("crop", "400:300:20:10"),
    ("transpose", "clock")]."""
    graph = None
    for frame in frames:
        if graph is None:
            graph = av.filter.Graph()
            node = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format.name,
                                    time_base=Fraction(1, 10))
            for name, args in chain:
                nxt = graph.add(name, args)
                node.link_to(nxt)
                node = nxt
            node.link_to(graph.add("buffersink"))
            graph.configure()
        frame.pts, frame.time_base = frame.pts or 0, Fraction(1, 10)
        graph.push(frame)
        yield graph.pull()


def square_clip(path: Path, n: int = 24, size: tuple[int, int] = (320, 240)) -> list[tuple[int, int]]:
    """A dark clip with a bright square moving right and down; returns its top-left corner per frame."""
    w, h = size
    corners = [(8 + 11 * i, 6 + 8 * i) for i in range(n)]

    def frames() -> Iterator[av.VideoFrame]:
        for x, y in corners:
            img = np.full((h, w, 3), 40, np.uint8)
            img[y:y + SQUARE, x:x + SQUARE] = 250
            yield av.VideoFrame.from_ndarray(img, format="bgr24")

    write_lossless(path, frames())
    return corners


def records(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if "event" not in r]


class BrightSpot(Stage):
    """A detector without a model: the bounding box of pixels brighter than 128 in the
    frame's own (possibly transformed) pixels, read with ``frame.resized`` (grey, full size)."""

    def process(self, frame: Frame) -> Frame:
        grey = frame.resized(frame.width, frame.height, "gray")
        ys, xs = np.nonzero(grey > 128)
        if len(xs):
            box = [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]]
            found = Detections(xyxy=box, score=[1.0], label="spot", keypoints=[np.array([[xs.min(), ys.min()]])])
            frame.detections = Detections.merge([frame.detections, found])
        return frame
