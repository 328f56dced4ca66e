"""A folder of images, in file-name order."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from .base import LOOP, Decoded, Reader, SourceError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


class FolderReader(Reader):
    def __init__(self, folder: Path, fps: float) -> None:
        self.paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self.paths:
            raise SourceError(f"image folder {folder} has no images ({', '.join(IMAGE_SUFFIXES)})")
        self.total_frames = len(self.paths)
        self.frame_rate = fps
        self._index = 0

    def units(self) -> Iterator[Any]:
        yield from enumerate(self.paths)

    def unit_time(self, unit: Any) -> float | None:
        return unit[0] / self.frame_rate

    def decode(self, unit: Any) -> list[Decoded]:
        import cv2

        if unit is None or unit is LOOP:
            return []
        image = cv2.imread(str(unit[1]), cv2.IMREAD_COLOR)
        if image is None:  # unreadable image: skipped like a corrupt packet
            self.decode_errors += 1
            return []
        pts = round(self._index * 1000 / self.frame_rate)
        self._index += 1
        return [(None, image, pts, self.time_base)]
