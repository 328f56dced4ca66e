"""In-memory stages for tests and examples: a list source, a collecting sink
and a fake inference stage with a fixed latency (no model needed)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ClassVar, Iterator

import numpy as np
from pydantic import Field

from .frame import Detections, Frame
from .stage import InferStage, Params, SourceStage, Stage

__all__ = ["ListSource", "CollectSink", "SleepInfer", "Fail", "COLLECTED"]

#: frames collected by CollectSink instances, by sink name then source id
COLLECTED: dict[str, dict[str, list[Frame]]] = {}
_LOCK = threading.Lock()


class ListSource(SourceStage):
    """``count`` synthetic BGR frames of ``width`` x ``height`` (grey level = seq % 256)."""

    class Params(Params):
        uri: str = ""
        count: int = Field(10, ge=0)
        width: int = 64
        height: int = 48
        decode_ms: float = Field(0.0, ge=0, description="simulated decode time (sleep) per frame")

    params: Params

    def open(self) -> None:
        self.total_frames = self.params.count
        self._seq = 0

    def units(self) -> Iterator[Any]:
        yield from range(self.params.count)
        yield None

    def decode_unit(self, unit: Any) -> list[Frame]:
        if unit is None:
            return []
        if self.params.decode_ms:
            time.sleep(self.params.decode_ms / 1000)
        img = np.full((self.params.height, self.params.width, 3), unit % 256, np.uint8)
        frame = Frame.from_image(img, self.source_id or "list", self._seq, pts=self._seq)
        self._seq += 1
        return [frame]


class CollectSink(Stage):
    """Keeps every frame it sees in ``COLLECTED[name][source_id]``."""

    kind: ClassVar[str] = "sink"

    def open(self) -> None:
        with _LOCK:
            COLLECTED.setdefault(self.name, {})[self.source_id] = []

    def process(self, frame: Frame) -> Frame:
        COLLECTED[self.name][self.source_id].append(frame)
        return frame


class SleepInfer(InferStage):
    """Pretends to infer: each frame takes ``ms`` on a worker thread (releases the GIL),
    then gets one detection labelled ``label``.  ``skip_every`` lets every k-th frame pass
    without work; ``every`` N works on frames 0, N, 2N, ... only (as ``detect.every``);
    opening takes ``open_ms`` (as a model's compile)."""

    class Params(Params):
        ms: float = Field(5.0, ge=0)
        open_ms: float = Field(0.0, ge=0)
        requests: int = Field(2, ge=0)
        label: str = "thing"
        skip_every: int = Field(0, ge=0)
        every: int = Field(1, ge=1)

    params: Params

    def open(self) -> None:
        time.sleep(self.params.open_ms / 1000)
        self.depth = max(1, self.params.requests)
        self._pool = ThreadPoolExecutor(self.depth)
        self.intervals: list[tuple[int, float, float]] = []
        self._n = 0

    def close(self) -> None:
        if hasattr(self, "_pool"):
            self._pool.shutdown(wait=True)

    def wants(self, frame: Frame) -> bool:
        self._n += 1
        if self.params.every > 1:
            return (self._n - 1) % self.params.every == 0
        return not (self.params.skip_every and self._n % self.params.skip_every == 0)

    def _work(self, seq: int) -> Detections:
        t0 = time.monotonic()
        time.sleep(self.params.ms / 1000)
        self.intervals.append((seq, t0, time.monotonic()))
        return Detections(xyxy=[[0, 0, 1, 1]], score=[1.0], label=[self.params.label])

    def start(self, frame: Frame) -> Future[Detections]:
        return self._pool.submit(self._work, frame.seq)

    def is_done(self, ticket: Any) -> bool:
        return ticket.done()

    def complete(self, frame: Frame, ticket: Any) -> Frame:
        frame.detections = Detections.merge([frame.detections, ticket.result()])
        return frame


class Fail(Stage):
    """Raises ``ValueError`` on every ``every``-th frame (error-policy tests)."""

    class Params(Params):
        every: int = Field(10, ge=1)

    params: Params

    def process(self, frame: Frame) -> Frame:
        if (frame.seq + 1) % self.params.every == 0:
            raise ValueError(f"planned failure on frame {frame.seq}")
        return frame
