"""The ``--sync`` baseline of a camera (:func:`sync_loop`): its source read, its frames decoded
and pushed through the stages on one thread, one request per stage."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from .executor import GraphExecutor

if TYPE_CHECKING:
    from .camera import Camera

__all__ = ["sync_loop"]


def sync_loop(cam: "Camera") -> None:
    """Read, decode and process ``cam``'s frames on one thread; one request, no overlap.  Ends with
    the source, or once reading is halted (the camera removed), the run stops or aborts.  A failure
    to read or decode the source is reported as the reader's or the decoder's (a camera whose source
    gives up stops alone while others run); a stage's as the worker's."""
    cam.native_ids["sync"] = threading.get_native_id()
    executor = GraphExecutor(cam.graph, cam.stages, False, cam.stage_stats, cam._output, cam.on_error,
                             cam.opts.trace, cam.source_id)
    cam._executor = executor
    where = "source"
    try:
        for unit in cam.source.units():  # type: ignore[attr-defined]
            if cam.halt_reading.is_set() or cam.stop_sources.is_set() or cam.abort.is_set():
                break
            if unit is not None:
                cam._delay()
            where = "decoder"
            frames = cam._decode(unit)
            where = "worker"
            for frame in frames:
                if not cam._take(frame):
                    return
                if cam.needs_image:
                    frame.image()
                executor.feed(frame)
            where = "source"
        else:
            cam._note_missing_frames()
    except Exception as exc:  # noqa: BLE001
        cam._fail(exc, where)
    finally:
        cam.stats.ended = time.monotonic()
