"""Facts about a video file read without decoding it."""

from __future__ import annotations

__all__ = ["count_frames"]


def count_frames(uri: str) -> tuple[int, int, int]:
    """(frames, width, height) of a video file, counting its packets (no decoding).

    Raises ValueError naming the file when it cannot be read as a video."""
    import av

    try:
        with av.open(uri) as c:
            s = c.streams.video[0]
            n = sum(1 for p in c.demux(s) if p.size)
            return n, s.codec_context.width, s.codec_context.height
    except (av.error.FFmpegError, OSError, IndexError) as exc:
        raise ValueError(f"cannot read video {uri}: {exc}") from None
