"""The live view of one camera of a session: what ``vapipe serve`` answers for a source."""

from __future__ import annotations

from .camera import Camera
from .stage import InferStage

__all__ = ["SourceInfo", "source_info"]


class SourceInfo(dict):
    """Live view of one source (plain dict: ``as JSON``); see :func:`source_info`."""


def source_info(cam: Camera, running: bool, finished: bool) -> SourceInfo:
    """``cam``'s id, uri, state and counters, read while it runs (``running``: one of its
    threads still runs; ``finished``: the session has closed it and its counters are final).
    State: the live source's last event (``connecting``, ``streaming``, ``stalled``, ...; a file
    is ``streaming``) while it runs, then ``failed`` or ``ended``."""
    s = cam.stats
    dropped = s.dropped if finished else s.dropped + cam.units.dropped + cam.frames.dropped
    if running:
        state = s.state or "streaming"
    else:
        state = "failed" if s.error else "ended"
    return SourceInfo(
        id=cam.source_id, uri=cam.uri, state=state, frames=s.processed, decoded=s.decoded, fps=s.fps,
        dropped=dropped, decode_errors=getattr(cam.source, "decode_errors", s.decode_errors),
        reconnects=s.reconnects, reason=s.reason, skipped_errors=s.skipped_errors, error=s.error,
        queue_packets=len(cam.units), queue_frames=len(cam.frames),
        in_flight={n: st.in_flight for n, st in cam.stages.items() if isinstance(st, InferStage)},
        latency=s.latency)
