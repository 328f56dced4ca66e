"""Synthetic ``testsrc://`` scenes (rendering is the "decoding")."""

from __future__ import annotations

from typing import Any, Iterator

from .base import LOOP, Decoded, Reader


class SceneReader(Reader):
    def __init__(self, uri: str, fps: float) -> None:
        from stages.testsrc import make_scene

        self.scene, options = make_scene(uri)
        self.frame_rate = float(options.get("fps", fps))
        self._frames: int | None = options.get("frames")  # in a whole pass
        self.total_frames = self._frames
        self._index = 0
        self._first = 0  # the first pass starts here (start_at); a loop starts again at 0
        self._passed = 0  # frames of the passes read before this one

    def start_at(self, index: int) -> None:
        self._index = self._first = index
        if self._frames is not None:
            self.total_frames = max(0, self._frames - index)

    def units(self) -> Iterator[Any]:
        limit = self._frames
        i, self._first = self._first, 0
        while limit is None or i < limit:
            yield i
            i += 1
        self._passed += i

    def unit_time(self, unit: Any) -> float | None:
        """The frame's time in the whole run: a loop's passes follow one another."""
        return (self._passed + unit) / self.frame_rate

    def decode(self, unit: Any) -> list[Decoded]:
        if unit is None or unit is LOOP:
            return []
        image, _ = self.scene.render(self._index)
        pts = round(self._index * 1000 / self.frame_rate)
        self._index += 1
        return [(None, image, pts, self.time_base)]
