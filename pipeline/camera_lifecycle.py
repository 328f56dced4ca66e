"""A camera's life seen from its session: opening it (failures in one line naming the source) and
waiting for the threads that stopping it waits for."""

from __future__ import annotations

import threading
import time

from .camera import Camera
from .left_readers import Stopped
from .run_options import StageFailure
from .stage_errors import one_line_error

__all__ = ["open_camera", "join_camera", "running_thread"]


def open_camera(cam: Camera) -> Camera:
    """Open ``cam``; on failure it is closed again and the error is one line naming its source."""
    try:
        cam.open()
        return cam
    except (StageFailure, Stopped):
        cam.close()
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the source
        cam.close()
        raise StageFailure(one_line_error(exc, cam.source_id)) from exc


def join_camera(cam: Camera, threads: list[threading.Thread], deadline: float) -> bool:
    """Wait until every thread of ``cam`` that stopping waits for has ended, or until
    ``deadline`` (monotonic seconds); True if they ended."""
    while True:
        running = running_thread(cam, threads)
        left = deadline - time.monotonic()
        if running is None or left <= 0:
            return running is None
        running.join(timeout=min(left, 0.05))


def running_thread(cam: Camera | None, threads: list[threading.Thread]) -> threading.Thread | None:
    """A thread of ``cam`` that still runs and that stopping waits for (see
    :meth:`Camera.waits_for`), or None."""
    return next((t for t in threads if t.is_alive() and (cam is None or cam.waits_for(t))), None)
