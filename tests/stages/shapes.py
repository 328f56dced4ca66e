"""A generated clip of coloured squares moving along known paths, and a detector for them.

The clip is H.264 (libx264, yuv420p) written with PyAV; the detector is a user stage
that finds the squares by colour, so tracking and counting can be checked end to end
through the real runtime without any model or shared asset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import cv2
import numpy as np
from pydantic import Field

from pipeline.frame import DETECTION_RAN, Detections, Frame
from pipeline.stage import Params, Stage

WIDTH, HEIGHT, FPS = 480, 270, 10
BACKGROUND = (90, 90, 90)
COLOURS = {"red": (0, 0, 220), "blue": (220, 0, 0), "green": (0, 200, 0)}  # BGR
SIDE = 40


@dataclass(frozen=True)
class Mover:
    """A square of ``colour`` whose centre is ``path(frame index)`` (None: not in view)."""

    colour: str
    path: Callable[[int], tuple[float, float] | None]


def make_clip(path: Path, movers: list[Mover], frames: int) -> Path:
    from tests.media import encode_images

    def image(i: int) -> np.ndarray:
        img = np.full((HEIGHT, WIDTH, 3), BACKGROUND, np.uint8)
        for m in movers:
            centre = m.path(i)
            if centre is not None:
                x, y = (int(round(v - SIDE / 2)) for v in centre)
                img[max(y, 0):max(y + SIDE, 0), max(x, 0):max(x + SIDE, 0)] = COLOURS[m.colour]
        return img

    return encode_images(path, (image(i) for i in range(frames)), FPS, {"crf": "18", "preset": "veryfast"})


class ColourShapes(Stage):
    """Finds the squares by colour: one detection per blob, labelled with its colour name.
    Runs on frames 0, N, 2N, ... (``every``) and marks them as a detector does."""

    provides: ClassVar[frozenset[str]] = frozenset({"detections"})
    needs_image = True

    class Params(Params):
        every: int = Field(1, ge=1)
        min_area: int = Field(60, ge=1)

    params: Params

    def open(self) -> None:
        self._count = 0

    def process(self, frame: Frame) -> Frame:
        run = self._count % self.params.every == 0
        self._count += 1
        frame.attrs[(self.name, DETECTION_RAN)] = run
        if not run:
            return frame
        image = frame.image().astype(np.int16)
        boxes, labels = [], []
        for name, bgr in COLOURS.items():
            mask = (np.abs(image - np.array(bgr, np.int16)).max(axis=2) < 60).astype(np.uint8)
            n, _, stats, _ = cv2.connectedComponentsWithStats(mask)
            for x, y, w, h, area in stats[1:n]:
                if area >= self.params.min_area:
                    boxes.append([x, y, x + w, y + h])
                    labels.append(name)
        found = Detections(xyxy=np.array(boxes, np.float32).reshape(-1, 4), score=[0.95] * len(boxes), label=labels)
        frame.detections = Detections.merge([frame.detections, found])
        return frame


def linear(start: tuple[float, float], step: tuple[float, float], first: int = 0,
           last: int | None = None) -> Callable[[int], Any]:
    """Centre moving by ``step`` per frame from ``start`` at frame ``first`` until frame ``last``."""

    def at(i: int) -> tuple[float, float] | None:
        if i < first or (last is not None and i > last):
            return None
        k = i - first
        return start[0] + step[0] * k, start[1] + step[1] * k

    return at
