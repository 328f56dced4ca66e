"""Video sources: files (PyAV), image folders and synthetic ``testsrc://`` scenes.

A source is split in two steps so that the runtime can run them on two
threads: :meth:`Decode.units` yields compressed units (packets, image paths,
scene indices) as they "arrive", and :meth:`Decode.decode_unit` turns a unit
into frames.  Decoded frames keep the decoder's pixel format; stages ask the
frame for the pixels they need (see :class:`pipeline.frame.Frame`).
"""

from __future__ import annotations

import os
import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

from pydantic import Field

from pipeline.frame import Frame
from pipeline.stage import Params, SourceStage

__all__ = ["Decode", "SourceError", "IMAGE_SUFFIXES", "VIDEO_SUFFIXES", "LOOP"]

LOOP = "loop"  # unit marking the end of one pass of a looping source

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_SUFFIXES = (".mp4", ".mkv", ".avi", ".mov", ".gif", ".webm", ".ts", ".m4v", ".mpg", ".mpeg", ".flv")


class SourceError(ValueError):
    """A source cannot be opened or read; the message names it."""


class Decode(SourceStage):
    """Reads frames from ``uri``: a video file, a folder of images or ``testsrc://PATTERN``."""

    class Params(Params):
        uri: str = Field("", description="file, image folder or testsrc://PATTERN (normally given by --source)")
        loop: bool = Field(False, description="start again at the end (timestamps keep increasing)")
        realtime: bool = Field(False, description="deliver frames at the stream's frame rate, as a camera does")
        threads: int = Field(0, ge=0, description="decoder threads; 0 = FFmpeg's automatic choice")
        fps: float = Field(25.0, gt=0, description="frame rate for image folders and synthetic scenes")

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reader: _Reader | None = None
        self._seq = 0

    @property
    def uri(self) -> str:
        return self.params.uri

    def open(self) -> None:
        uri = self.params.uri
        if not uri:
            raise SourceError("no source given; pass --source FILE|FOLDER|testsrc://PATTERN")
        if uri.startswith("testsrc://"):
            self._reader = _SceneReader(uri, self.params.fps)
        elif os.path.isdir(uri):
            self._reader = _FolderReader(Path(uri), self.params.fps)
        else:
            self._reader = _VideoReader(uri, self.params.threads)
        self._seq = 0

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def total_frames(self) -> int | None:
        """Frames in one pass of the source, if known (for progress bars)."""
        return None if self._reader is None or self.params.loop else self._reader.total_frames

    @property
    def frame_rate(self) -> float | None:
        return None if self._reader is None else self._reader.frame_rate

    def units(self) -> Iterator[Any]:
        """Compressed units in arrival order (paced to real time if ``realtime``)."""
        assert self._reader is not None, "open() first"
        start = time.monotonic()
        first_ts: float | None = None
        while True:
            for unit in self._reader.units():
                if self.params.realtime:
                    ts = self._reader.unit_time(unit)
                    if ts is not None:
                        first_ts = ts if first_ts is None else first_ts
                        delay = (ts - first_ts) - (time.monotonic() - start)
                        if delay > 0:
                            time.sleep(delay)
                yield unit
            if not self.params.loop:
                break
            self._reader.seek_start()
            yield LOOP  # the decode step flushes the decoder and shifts timestamps
        yield None  # end of stream: flush the decoder

    def decode_unit(self, unit: Any) -> list[Frame]:
        """Frames decoded from one unit (None flushes); seq numbers are assigned here."""
        assert self._reader is not None, "open() first"
        frames = []
        for av_frame, image, pts, tb in self._reader.decode(unit):
            if image is not None:
                f = Frame.from_image(image, self.source_id or self.params.uri, self._seq, pts, tb)
            else:
                f = Frame(source_id=self.source_id or self.params.uri, seq=self._seq, width=av_frame.width,
                          height=av_frame.height, pts=pts, time_base=tb, av_frame=av_frame)
            self._seq += 1
            frames.append(f)
        return frames


class _Reader:
    total_frames: int | None = None
    frame_rate: float | None = None

    def units(self) -> Iterator[Any]:
        raise NotImplementedError

    def unit_time(self, unit: Any) -> float | None:
        return None

    def decode(self, unit: Any) -> list[tuple[Any, Any, int | None, Fraction | None]]:
        raise NotImplementedError

    def seek_start(self) -> None:
        """Reader side of a loop: go back to the first unit."""

    def after_loop(self) -> list[tuple[Any, Any, int | None, Fraction | None]]:
        """Decoder side of a loop: flush what is buffered; later timestamps continue."""
        return []

    def close(self) -> None:
        pass


class _VideoReader(_Reader):
    def __init__(self, uri: str, threads: int) -> None:
        import av

        self.uri = uri
        if "://" not in uri and not os.path.exists(uri):
            raise SourceError(f"source not found: {uri}")
        try:
            self.container = av.open(uri, timeout=(10.0, 10.0))
        except (av.error.FFmpegError, OSError) as exc:
            raise SourceError(f"cannot open source {uri}: {_ffmpeg_reason(exc)}; "
                              f"valid: a video file ({', '.join(VIDEO_SUFFIXES)}), an image folder "
                              "or testsrc://PATTERN") from None
        if not self.container.streams.video:
            self.container.close()
            raise SourceError(f"source {uri} has no video stream")
        self.stream = self.container.streams.video[0]
        ctx = self.stream.codec_context
        if threads:
            ctx.thread_count = threads
        ctx.thread_type = "AUTO"
        self.total_frames = self.stream.frames or None
        rate = self.stream.average_rate or self.stream.guessed_rate
        self.frame_rate = float(rate) if rate else None
        self._offset = 0          # pts added after each loop
        self._last_pts: int | None = None
        self._step = 1
        self.time_base = self.stream.time_base or Fraction(1, 90000)
        if rate:
            self._step = max(1, round(1 / (float(rate) * float(self.time_base))))

    def units(self) -> Iterator[Any]:
        import av

        try:
            for packet in self.container.demux(self.stream):
                if packet.size == 0 and packet.pts is None:
                    continue
                yield packet
        except av.error.FFmpegError as exc:
            raise SourceError(f"read error in {self.uri}: {_ffmpeg_reason(exc)}") from None

    def unit_time(self, unit: Any) -> float | None:
        ts = unit.pts if unit.pts is not None else unit.dts
        return None if ts is None else float(ts * self.time_base) + float(self._offset * self.time_base)

    def decode(self, unit: Any) -> list[tuple[Any, Any, int | None, Fraction | None]]:
        import av

        ctx = self.stream.codec_context
        if unit is LOOP:
            return self.after_loop()
        try:
            frames = ctx.decode(unit)
        except av.error.InvalidDataError:
            return []  # a corrupt packet: skip to the next decodable frame
        out = []
        for f in frames:
            pts = f.pts if f.pts is not None else (self._last_pts + self._step if self._last_pts is not None else 0)
            pts += self._offset
            if self._last_pts is not None and pts <= self._last_pts:
                pts = self._last_pts + self._step
            self._last_pts = pts
            out.append((f, None, pts, self.time_base))
        return out

    def seek_start(self) -> None:
        self.container.seek(0, stream=self.stream)

    def after_loop(self) -> list[tuple[Any, Any, int | None, Fraction | None]]:
        out = self.decode(None)
        self.stream.codec_context.flush_buffers()
        if self._last_pts is not None:
            start = self.stream.start_time
            self._offset = self._last_pts + self._step - (int(start) if start is not None else 0)
        return out

    def close(self) -> None:
        try:
            self.container.close()
        except Exception:  # noqa: BLE001 - closing a broken container
            pass


class _FolderReader(_Reader):
    def __init__(self, folder: Path, fps: float) -> None:
        self.paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self.paths:
            raise SourceError(f"image folder {folder} has no images ({', '.join(IMAGE_SUFFIXES)})")
        self.total_frames = len(self.paths)
        self.frame_rate = fps
        self.time_base = Fraction(1, 1000)
        self._index = 0

    def units(self) -> Iterator[Any]:
        yield from enumerate(self.paths)

    def unit_time(self, unit: Any) -> float | None:
        return unit[0] / self.frame_rate

    def decode(self, unit: Any) -> list[tuple[Any, Any, int | None, Fraction | None]]:
        import cv2

        if unit is None or unit is LOOP:
            return []
        image = cv2.imread(str(unit[1]), cv2.IMREAD_COLOR)
        if image is None:
            return []  # unreadable image: skipped like a corrupt packet
        pts = round(self._index * 1000 / self.frame_rate)
        self._index += 1
        return [(None, image, pts, self.time_base)]



class _SceneReader(_Reader):
    def __init__(self, uri: str, fps: float) -> None:
        from stages.testsrc import make_scene

        self.scene, options = make_scene(uri)
        self.frame_rate = float(options.get("fps", fps))
        self.total_frames = options.get("frames")
        self.time_base = Fraction(1, 1000)
        self._index = 0

    def units(self) -> Iterator[Any]:
        limit = self.total_frames
        i = 0
        while limit is None or i < limit:
            yield i
            i += 1

    def unit_time(self, unit: Any) -> float | None:
        return unit / self.frame_rate

    def decode(self, unit: Any) -> list[tuple[Any, Any, int | None, Fraction | None]]:
        if unit is None or unit is LOOP:
            return []
        image, _ = self.scene.render(self._index)
        pts = round(self._index * 1000 / self.frame_rate)
        self._index += 1
        return [(None, image, pts, self.time_base)]



def _ffmpeg_reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return str(text).split(":")[0] if text else type(exc).__name__
