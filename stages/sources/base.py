"""The reader contract shared by all sources."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterator

__all__ = ["LOOP", "Decoded", "Reader", "SourceError", "is_live_uri", "LIVE_SCHEMES"]

#: unit marking the end of one pass of a looping source
LOOP = "loop"
#: (av.VideoFrame or None, BGR image or None, pts, time_base)
Decoded = tuple[Any, Any, "int | None", "Fraction | None"]

LIVE_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "tcp", "srt", "rtp")


class SourceError(ValueError):
    """A source cannot be opened or read; the message names it."""


def is_live_uri(uri: str) -> bool:
    """Cameras and network streams: they do not wait for the pipeline."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    return scheme in LIVE_SCHEMES or uri.startswith("/dev/video")


class Reader:
    """One opened source.  ``units`` runs on the reader thread, ``decode`` on the
    decoder thread; a reader is used by at most those two threads."""

    total_frames: int | None = None
    frame_rate: float | None = None
    time_base: Fraction = Fraction(1, 1000)
    decode_errors: int = 0
    consecutive_errors: int = 0
    #: the file the last frame :meth:`decode` returned was read from (image folders), else None
    last_file: str | None = None
    #: True while the reader thread waits inside a read that a close() must not cut short
    reading: bool = False

    def units(self) -> Iterator[Any]:
        raise NotImplementedError

    def unit_time(self, unit: Any) -> float | None:
        """When a unit is due in seconds (real-time pacing), if known; increasing in reading order."""
        return None

    def decode(self, unit: Any) -> list[Decoded]:
        raise NotImplementedError

    def last_time(self) -> float | None:
        """Time in seconds just after the last decoded frame (for continuing timestamps)."""
        return None

    def continue_after(self, seconds: float) -> None:
        """Shift this reader's timestamps so that they start at ``seconds``."""

    def start_at(self, index: int) -> None:
        """Deliver frames from the ``index``-th (0-based) on; called once, before ``units``."""
        raise SourceError(f"{type(self).__name__} cannot start at frame {index}")

    def close(self) -> None:
        pass
