"""Facts about a video file read without decoding it."""

from __future__ import annotations

import os

__all__ = ["count_frames", "iso_boxes"]


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


def iso_boxes(path: str | os.PathLike[str], limit: int | None = None) -> list[tuple[bytes, int, int]]:
    """Top-level boxes of an ISO base media file (MP4, MOV, M4V): (type, offset, declared
    size) in file order, read from their headers only, the first ``limit`` of them if given.
    The last one may end past the end of the file (a writer stopped in the middle of it); a
    size below 8 ends the list.  Raises OSError when the file cannot be read."""
    boxes: list[tuple[bytes, int, int]] = []
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        pos = 0
        while pos + 8 <= end and (limit is None or len(boxes) < limit):
            f.seek(pos)
            head = f.read(16)
            size, kind = int.from_bytes(head[:4], "big"), head[4:8]
            if size == 1 and len(head) == 16:  # 64-bit size
                size = int.from_bytes(head[8:16], "big")
            elif size == 0:  # to the end of the file
                size = end - pos
            if size < 8:
                break
            boxes.append((kind, pos, size))
            pos += size
    return boxes
