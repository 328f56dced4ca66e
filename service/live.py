"""Live view: annotated JPEGs of a camera, made only while someone watches.

The runtime hands every finished frame to :meth:`LiveView.tap` on the camera's
worker thread; with nobody watching that is one dictionary lookup.  While a
camera has watchers, at most ``fps`` frames a second are kept (a reference, no
copy) and an encoder thread scales them to ``width`` pixels wide straight from
the decoder's planes, draws the detections and encodes a JPEG; every watcher is
woken.  The encoder thread ends when the last watcher leaves.

A watcher is an :class:`asyncio` consumer (the MJPEG response): it is woken
through its event loop, so no server thread waits per viewer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import cv2

from pipeline.frame import Frame
from stages.annotate import annotate_all, scale_detections

__all__ = ["LiveView", "Watch", "Picture"]


@dataclass(frozen=True)
class Picture:
    version: int
    jpeg: bytes
    seq: int
    captured_ns: int       # monotonic clock when the frame left the decoder
    encoded_ns: int        # monotonic clock when the JPEG was ready


@dataclass(eq=False)
class Watch:
    """One viewer of one source; close it when the viewer leaves."""

    view: "LiveView"
    source_id: str
    loop: asyncio.AbstractEventLoop | None
    event: asyncio.Event | None = None
    closed: bool = field(default=False)

    def latest(self) -> Picture | None:
        return self.view.latest(self.source_id)

    async def next(self, after: int, timeout: float) -> Picture | None:
        """The first picture newer than version ``after``, or None after ``timeout`` seconds."""
        pic = self.latest()
        if pic is not None and pic.version > after:
            return pic
        assert self.event is not None
        self.event.clear()
        pic = self.latest()
        if pic is not None and pic.version > after:
            return pic
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except asyncio.TimeoutError:
            return None
        pic = self.latest()
        return pic if pic is not None and pic.version > after else None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.view._leave(self)


class LiveView:
    def __init__(self, fps: float = 5.0, width: int = 640, quality: int = 80) -> None:
        self.fps, self.width, self.quality = fps, width, quality
        self._watchers: dict[str, list[Watch]] = {}
        self._next_at: dict[str, float] = {}
        self._pending: dict[str, Frame] = {}
        self._latest: dict[str, Picture] = {}
        self.produced: dict[str, int] = {}   # JPEGs made per source (metrics)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._version = 0

    # worker threads -----------------------------------------------------------------------
    def tap(self, source_id: str, frame: Frame) -> None:
        """Called for every frame leaving the graph; returns at once."""
        if not self._watchers.get(source_id):
            return
        now = time.monotonic()
        period = 1.0 / self.fps
        due = self._next_at.get(source_id, 0.0)
        if now < due - period / 4:  # a frame a little early is taken: frames come with jitter
            return
        with self._cond:
            # on a grid of the period, so that a camera at twice the cap gives the cap, not a third
            # of its rate; after a pause (or at the first frame) the grid starts again from now
            self._next_at[source_id] = (due if now - due < period else now) + period
            self._pending[source_id] = frame
            self._cond.notify_all()

    # viewers --------------------------------------------------------------------------------
    def watch(self, source_id: str) -> Watch:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        w = Watch(self, source_id, loop, asyncio.Event() if loop is not None else None)
        with self._cond:
            self._watchers.setdefault(source_id, []).append(w)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._encode_loop, name="live-view", daemon=True)
                self._thread.start()
        return w

    def _leave(self, w: Watch) -> None:
        with self._cond:
            lst = self._watchers.get(w.source_id, [])
            if w in lst:
                lst.remove(w)
            if not lst:
                self._watchers.pop(w.source_id, None)
                self._pending.pop(w.source_id, None)
                self._next_at.pop(w.source_id, None)
            self._cond.notify_all()

    def viewers(self) -> dict[str, int]:
        with self._cond:
            return {k: len(v) for k, v in self._watchers.items() if v}

    def latest(self, source_id: str) -> Picture | None:
        return self._latest.get(source_id)

    # encoder thread --------------------------------------------------------------------------
    def _encode_loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and self._watchers:
                    self._cond.wait(0.5)
                if not self._watchers:
                    self._thread = None
                    return
                source_id, frame = self._pending.popitem()
            jpeg = self._encode(frame)
            with self._cond:
                self._version += 1
                pic = Picture(self._version, jpeg, frame.seq, frame.captured_ns, time.monotonic_ns())
                self._latest[source_id] = pic
                self.produced[source_id] = self.produced.get(source_id, 0) + 1
                watchers = list(self._watchers.get(source_id, []))
            for w in watchers:
                if w.loop is not None and w.event is not None:
                    w.loop.call_soon_threadsafe(w.event.set)

    def _encode(self, frame: Frame) -> bytes:
        w = min(self.width, frame.width)
        h = max(2, round(frame.height * w / frame.width / 2) * 2)
        image = frame.resized(w, h).copy()
        if len(frame.detections):
            annotate_all(image, scale_detections(frame.detections, w / frame.width, h / frame.height))
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, self.quality])
        if not ok:  # pragma: no cover - OpenCV always encodes a uint8 BGR image
            raise RuntimeError("JPEG encoding failed")
        return buf.tobytes()

    def close(self) -> None:
        with self._cond:
            watchers = [w for lst in self._watchers.values() for w in lst]
        for w in watchers:
            w.close()

    def stats(self) -> dict[str, Any]:
        return {"viewers": self.viewers(), "produced": dict(self.produced)}
