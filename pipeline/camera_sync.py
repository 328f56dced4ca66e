"""The ``--sync`` baseline of a camera (:class:`SyncLoop`): its source read, its frames decoded
and pushed through the stages on one thread, one request per stage."""

from __future__ import annotations

import threading
import time
from typing import Any

from .executor import GraphExecutor
from .frame import Frame

__all__ = ["SyncLoop"]


class SyncLoop:
    """``sync_loop`` of a :class:`pipeline.camera.Camera`, which provides the attributes and
    the methods declared here."""

    graph: Any
    stages: dict[str, Any]
    stage_stats: dict[str, Any]
    opts: Any
    source: Any
    source_id: str
    stats: Any
    needs_image: bool
    native_ids: dict[str, int]
    halt_reading: threading.Event
    stop_sources: threading.Event
    abort: threading.Event
    _executor: GraphExecutor | None

    def _output(self, frame: Frame) -> None:
        raise NotImplementedError  # the camera's: a frame left the graph

    def on_error(self, stage_name: str, exc: BaseException, frame: Frame | None) -> bool:
        raise NotImplementedError  # the camera's: the stage's error policy

    def _decode(self, unit: Any) -> list[Frame]:
        raise NotImplementedError  # the camera's: the frames of one unit

    def _take(self, frame: Frame) -> bool:
        raise NotImplementedError  # the camera's: count a frame; False once max_frames is reached

    def _delay(self) -> None:
        raise NotImplementedError  # the camera's: capture_delay_ms

    def _note_missing_frames(self) -> None:
        raise NotImplementedError  # the camera's: at the end of a source read to its end

    def _fail(self, exc: BaseException, where: str) -> None:
        raise NotImplementedError  # the camera's: report a failure of its source, decoder or worker

    def sync_loop(self) -> None:
        """Read, decode and process on one thread; one request, no overlap.  Ends with the source,
        or once reading is halted (the camera removed), the run stops or aborts.  A failure to
        read or decode the source is reported as the reader's or the decoder's (a camera whose
        source gives up stops alone while others run); a stage's as the worker's."""
        self.native_ids["sync"] = threading.get_native_id()
        executor = GraphExecutor(self.graph, self.stages, False, self.stage_stats, self._output, self.on_error,
                                 self.opts.trace, self.source_id)
        self._executor = executor
        where = "source"
        try:
            for unit in self.source.units():
                if self.halt_reading.is_set() or self.stop_sources.is_set() or self.abort.is_set():
                    break
                if unit is not None:
                    self._delay()
                where = "decoder"
                frames = self._decode(unit)
                where = "worker"
                for frame in frames:
                    if not self._take(frame):
                        return
                    if self.needs_image:
                        frame.image()
                    executor.feed(frame)
                where = "source"
            else:
                self._note_missing_frames()
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, where)
        finally:
            self.stats.ended = time.monotonic()
