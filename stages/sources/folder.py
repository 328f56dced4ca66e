"""A folder of images, in file-name order."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from .base import LOOP, Decoded, Reader, SourceError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


class FolderReader(Reader):
    def __init__(self, folder: Path, fps: float) -> None:
        self.folder = folder
        self.paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self.paths:
            raise SourceError(f"image folder {folder} has no images ({', '.join(IMAGE_SUFFIXES)})")
        self.total_frames = len(self.paths)
        self.frame_rate = fps
        self._index = 0
        self._first = 0  # the first pass starts here (start_at); a loop starts again at 0
        self._passed = 0  # frames of the passes read before this one

    def start_at(self, index: int) -> None:
        self._index = self._first = index
        self.total_frames = max(0, len(self.paths) - index)

    def units(self) -> Iterator[Any]:
        first, self._first = self._first, 0
        yield from enumerate(self.paths[first:], first)
        self._passed += len(self.paths)

    def unit_time(self, unit: Any) -> float | None:
        """The image's time in the whole run: a loop's passes follow one another."""
        return (self._passed + unit[0]) / self.frame_rate

    def decode(self, unit: Any) -> list[Decoded]:
        if unit is LOOP:
            return []
        if unit is None:
            if self._index == 0 and self.decode_errors:
                raise SourceError(f"image folder {self.folder}: none of its {len(self.paths)} images could be read")
            return []
        image = _read_image(unit[1])
        if image is None:  # unreadable image: skipped like a corrupt packet, and counted
            self.decode_errors += 1
            return []
        pts = round(self._index * 1000 / self.frame_rate)
        self._index += 1
        self.last_file = unit[1].name
        return [(None, image, pts, self.time_base)]


def _read_image(path: Path) -> Any:
    """BGR image, or None if the file is unreadable or cut short (a JPEG without an
    end-of-image marker after its picture data would otherwise decode to a half-grey picture;
    data after that marker, as phones append, is allowed)."""
    import cv2
    import numpy as np

    try:
        data = path.read_bytes()
    except OSError:
        return None
    if path.suffix.lower() in (".jpg", ".jpeg") and _cut_short_jpeg(data):
        return None
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None


def _cut_short_jpeg(data: bytes) -> bool:
    """True unless an end-of-image marker (FF D9) follows the picture's start of scan (FF DA).
    The segments before the scan are stepped over by their lengths: an Exif thumbnail in them
    has markers of its own."""
    i = 2  # after the start-of-image marker
    while i + 4 <= len(data) and data[i] == 0xFF and data[i + 1] != 0xDA:
        i += 1 if data[i + 1] == 0xFF else 2 + int.from_bytes(data[i + 2:i + 4], "big")
    scan = data.find(b"\xff\xda", i)
    return scan < 0 or data.find(b"\xff\xd9", scan) < 0
