"""Video containers and streams through PyAV: files, RTSP/HTTP/RTMP/UDP streams, v4l2 cameras."""

from __future__ import annotations

import os
import threading
import time
from fractions import Fraction
from typing import Any, Iterator

from pipeline.videofile import iso_boxes

from .._paths import done_reading, reading
from .base import LIVE_SCHEMES, LOOP, Decoded, Reader, SourceError
from .frame_filter import Deinterlace, FrameFilter
from .start import StartPoint, seek_frame

#: FFmpeg demuxers that turn text into pictures (ANSI art, subtitles as video): never a camera's video
TEXT_FORMATS = frozenset({"tty"})
#: FFmpeg's AVFMT_FLAG_NONBLOCK: the v4l2 demuxer opens the device with O_NONBLOCK
AVFMT_FLAG_NONBLOCK = 0x0004
#: how often a non-blocking device is asked again for a frame
POLL_S = 0.005
VIDEO_SUFFIXES = (".mp4", ".mkv", ".avi", ".mov", ".gif", ".webm", ".ts", ".m4v", ".mpg", ".mpeg", ".flv")


class VideoReader(Reader):
    """An opened container; ``timeouts`` = (open, read) seconds, enforced by FFmpeg's
    interrupt callback, so a server that accepts and then sends nothing cannot block.

    A V4L2 camera blocks inside the kernel, out of that callback's reach: it is opened
    non-blocking and polled every ``POLL_S`` until a frame comes, the read timeout
    passes or ``stop`` is set.

    ``autorotate``: frames with a display matrix (phone videos) are turned upright, as players
    show them; ``deinterlace``: interlaced frames are deinterlaced; ``square_pixels``:
    anamorphic video is stretched to square pixels (:mod:`.frame_filter`).
    """

    def __init__(self, uri: str, threads: int = 0, timeouts: tuple[float, float] = (10.0, 10.0),
                 options: dict[str, str] | None = None, stop: threading.Event | None = None,
                 autorotate: bool = True, deinterlace: Deinterlace = "auto", square_pixels: bool = True) -> None:
        import av

        self.uri = uri
        self.read_timeout_s = timeouts[1]
        self._stop = stop
        fmt = None
        if uri.startswith("/dev/video"):
            fmt = "v4l2"
            options = {"fflags": f"+{AVFMT_FLAG_NONBLOCK}", **(options or {})}
        elif "://" not in uri and not os.path.exists(uri):
            raise SourceError(f"source not found: {uri}")
        # A V4L2 packet points into the device's capture buffers, and so does a raw frame
        # decoded from it; both would outlive a reconnect's close of the device.
        self._copy_packets = fmt == "v4l2"
        started = time.monotonic()
        try:
            self.container = av.open(uri, format=fmt, timeout=timeouts, options=options or {})
        except (av.error.FFmpegError, OSError) as exc:
            if "://" not in uri and fmt is None and unfinished_mp4(uri):
                raise SourceError(f"cannot open source {uri}: the file has media data but no index ('moov' box): "
                                  "its recording was not finished") from None
            # the kind of source is clear for URLs and cameras (unless FFmpeg has no such protocol)
            if isinstance(exc, av.error.ProtocolNotFoundError):
                hint = f"; valid: {', '.join(s + '://' for s in LIVE_SCHEMES)}, file://, testsrc://"
            elif "://" in uri and time.monotonic() - started >= 0.9 * timeouts[0]:
                # a server that took the connection and then said nothing: FFmpeg's own reason
                # ("Invalid data found") would blame the data
                raise SourceError(f"cannot open source {uri}: no answer within the open timeout "
                                  f"({timeouts[0]:g} s)") from None
            elif "://" in uri or fmt == "v4l2":
                hint = ""
            else:
                hint = (f"; valid: a video file ({', '.join(VIDEO_SUFFIXES)}), a stream URL (rtsp://, http://, "
                        "...), /dev/videoN, an image folder or testsrc://PATTERN")
            raise SourceError(f"cannot open source {uri}: {ffmpeg_reason(exc)}{hint}") from None
        if self.container.format.name in TEXT_FORMATS:  # FFmpeg renders text files as video
            self.container.close()
            raise SourceError(f"source {uri} is a text file, not a video (FFmpeg would render its text); valid: a "
                              f"video file ({', '.join(VIDEO_SUFFIXES)}), a stream URL, /dev/videoN, an image "
                              "folder or testsrc://PATTERN")
        if not self.container.streams.video:
            found = ", ".join(sorted({st.type for st in self.container.streams})) or "none"
            guessed = self.container.format.name
            self.container.close()
            raise SourceError(f"source {uri} has no video stream (FFmpeg read it as '{guessed}', streams: {found})")
        self.stream = self.container.streams.video[0]
        ctx = self.stream.codec_context
        if not ctx.width:
            # FFmpeg ends stream probing at the open timeout without an error; a stream that
            # completed the handshake but sent no picture in that time did not open. Probing
            # that ended earlier found bytes that only looked like video (noise read as H.263).
            guessed = self.container.format.name
            self.container.close()
            if "://" in uri and time.monotonic() - started >= 0.9 * timeouts[0]:
                raise SourceError(f"cannot open source {uri}: no video within the open timeout")
            raise SourceError(f"cannot open source {uri}: Invalid data found when processing input "
                              f"(FFmpeg read it as '{guessed}' but found no picture size)")
        if threads:
            ctx.thread_count = threads
        ctx.thread_type = "AUTO"
        self.total_frames = self.stream.frames or None
        # A finished HLS playlist (#EXT-X-ENDLIST: VOD) has a duration, a live one does not:
        # the first is a recording that ends, not a camera to reconnect to.
        self.segmented = self.container.format.name == "hls"
        self.finite = self.segmented and bool(self.container.duration)
        rate = self.stream.average_rate or self.stream.guessed_rate
        self.frame_rate = float(rate) if rate else None
        self.time_base = self.stream.time_base or Fraction(1, 90000)
        self._tick_s = float(self.time_base)  # seconds per tick, for the per-packet times below
        self._offset = 0  # added to every pts after a loop or a reconnect
        self._last_pts: int | None = None
        self._last_unit_time: float | None = None
        self._last_decode_time: float | None = None
        self._step = max(1, round(1 / (float(rate) * float(self.time_base)))) if rate else 1
        self._start: StartPoint | None = None  # start_at: frames before it are decoded, not delivered
        self._pace_from: Fraction | None = None  # start_at: units presented earlier are not paced
        self._pending: list[Any] = []  # start_at: packets read from its keyframe on, not yet handed out
        sample_aspect = self.stream.sample_aspect_ratio if square_pixels else None
        self._filter = FrameFilter(uri, self.time_base, autorotate, deinterlace, sample_aspect)
        self._read_lock = threading.Lock()
        self._reading = False  # the reader thread is inside a read of the container
        self._closed = False
        self._close_after_read = False  # close() came during that read: the reader thread closes
        local = uri[len("file://"):] if uri.startswith("file://") else uri
        # sinks of the process refuse to write the file while it is read
        self._read_key = reading(local) if fmt is None and "://" not in local else None

    def start_at(self, index: int) -> None:
        """Seek to a keyframe at or before frame ``index`` and deliver frames from ``index`` on;
        the ones between the keyframe and ``index`` are decoded (they are references) and dropped
        (:func:`.start.seek_frame`)."""
        if index <= 0:
            return
        rate = self.stream.average_rate or self.stream.guessed_rate
        try:
            self._start, self._pending = seek_frame(self.container, self.stream, index, rate, self.time_base)
        except Exception as exc:  # noqa: BLE001 - PyAV raises several kinds for unseekable inputs
            raise SourceError(f"cannot start {self.uri} at frame {index}: {ffmpeg_reason(exc)}") from None
        self._pace_from = self._start.time - self._start.ticks / 2 if rate else None
        if self.total_frames:
            self.total_frames = max(0, self.total_frames - index)

    def units(self) -> Iterator[Any]:
        import av

        last = time.monotonic()
        pending, self._pending = self._pending, []
        yield from pending
        while True:
            packets = self.container.demux(self.stream) if not self._closed else iter(())
            try:
                while (packet := self._read(packets)) is not None:
                    if packet.size == 0 and packet.pts is None:
                        continue
                    last = time.monotonic()
                    yield _owned_copy(packet) if self._copy_packets else packet
                return
            except av.error.BlockingIOError:
                # a non-blocking device (v4l2) has no frame yet
                if time.monotonic() - last > self.read_timeout_s:
                    raise SourceError(f"read error in {self.uri}: no frame for {self.read_timeout_s:g} s") from None
                if self._stop is None:
                    time.sleep(POLL_S)
                elif self._stop.wait(POLL_S):
                    return
            except av.error.ExitError:  # FFmpeg's interrupt callback: the read timeout passed
                raise SourceError(f"read error in {self.uri}: no data for {self.read_timeout_s:g} s "
                                  "(read_timeout_s)") from None
            except av.error.FFmpegError as exc:
                raise SourceError(f"read error in {self.uri}: {ffmpeg_reason(exc)}") from None

    @property
    def reading(self) -> bool:
        """True while the reader thread waits inside a read (up to the read timeout)."""
        return self._reading

    def _read(self, packets: Iterator[Any]) -> Any | None:
        """The next packet; None at the end, or when :meth:`close` came during the read (the
        container is closed here then, by the thread that was reading it)."""
        with self._read_lock:
            if self._closed:
                return None
            self._reading = True
        try:
            packet = next(packets, None)
        except BaseException:
            if self._end_read():
                return None
            raise
        return None if self._end_read() else packet

    def _end_read(self) -> bool:
        """Leave the read; True if the reader was closed meanwhile (and is closed now)."""
        with self._read_lock:
            self._reading = False
            late, self._close_after_read = self._close_after_read, False
        if late:
            self._close_container()
        return late

    def unit_time(self, unit: Any) -> float | None:
        """A packet's decode time (dts), which increases in reading order: B-frames, read before
        the frames they are shown between, leave in turn.  A packet without one (the first of a
        Matroska file, before FFmpeg can tell the reordering) is due at its presentation time,
        at most one frame after the packet before it."""
        ts = unit.pts if unit.pts is not None else unit.dts
        if ts is None or (self._pace_from is not None and ts < self._pace_from):
            return None  # unknown, or before the start frame: not paced
        shown = (ts + self._offset) * self._tick_s
        self._last_unit_time = shown if self._last_unit_time is None else max(self._last_unit_time, shown)
        if unit.dts is not None:
            t = (unit.dts + self._offset) * self._tick_s
        elif self._last_decode_time is not None:
            t = min(shown, self._last_decode_time + self._step * self._tick_s)
        else:
            t = shown
        self._last_decode_time = t
        return t

    def last_unit_time(self) -> float | None:
        """Reader side: time just after the latest presentation time seen by ``unit_time``."""
        if self._last_unit_time is None:
            return None
        return self._last_unit_time + float(self._step * self.time_base)

    def decode(self, unit: Any) -> list[Decoded]:
        import av

        if unit is LOOP:
            return []
        try:
            frames = self.stream.codec_context.decode(unit)
        except av.error.FFmpegError:
            # a corrupt packet or a missing reference: skip to the next decodable frame
            self.decode_errors += 1
            self.consecutive_errors += 1
            frames = []  # (a flush still hands on what the filters hold)
        if frames:
            self.consecutive_errors = 0
        out = []
        for f in frames:
            if self._start is not None:
                if self._start.before(f.pts):
                    continue  # before the start frame (decoded from the keyframe on)
                self._start = None
            if f.time_base is None:  # frames drained at the end of the stream carry none
                f.time_base = self.time_base
            if getattr(f, "is_corrupt", False):
                # FFmpeg concealed damaged data (corrupt slices, missing references): the frame
                # is passed on, and counted as a decode error
                self.decode_errors += 1
            pts = f.pts if f.pts is not None else (self._last_pts + self._step - self._offset
                                                   if self._last_pts is not None else 0)
            pts += self._offset
            if self._last_pts is not None and pts <= self._last_pts:
                pts = self._last_pts + self._step
            self._last_pts = pts
            out += [(g, None, t, self.time_base) for g, t in self._filter.push(f, pts)]
        if unit is None:  # end of stream: what the filters hold
            out += [(g, None, t, self.time_base) for g, t in self._filter.flush()]
        return out

    def last_time(self) -> float | None:
        return None if self._last_pts is None else float((self._last_pts + self._step) * self.time_base)

    def continue_after(self, seconds: float) -> None:
        start = self.stream.start_time
        self._offset = round(seconds / float(self.time_base)) - (int(start) if start is not None else 0)

    def close(self) -> None:
        """Close the container; during a read on another thread, that thread closes it when
        the read returns (FFmpeg's read cannot be interrupted, and the container must outlive it)."""
        with self._read_lock:
            if self._closed:
                return
            self._closed = True
            if self._reading:
                self._close_after_read = True
                return
        self._close_container()

    def _close_container(self) -> None:
        if self._read_key is not None:
            done_reading(self._read_key)
            self._read_key = None
        try:
            self.container.close()
        except Exception:  # noqa: BLE001 - closing a broken container
            pass


def unfinished_mp4(path: str) -> bool:
    """True for an ISO base media file (MP4, MOV, M4V) with media data ('mdat') but without
    the index that says where its frames are ('moov'): what a writer leaves when it is stopped
    before it finishes the file.  Only the top-level boxes are read."""
    try:
        kinds = {kind for kind, _, _ in iso_boxes(path, limit=10_000)}
    except OSError:
        return False
    return b"ftyp" in kinds and b"mdat" in kinds and b"moov" not in kinds


def _owned_copy(packet: Any) -> Any:
    """The packet's data and timing in memory of its own (the device buffer goes back now)."""
    import av

    copy = av.Packet(bytes(packet))
    copy.pts, copy.dts, copy.time_base = packet.pts, packet.dts, packet.time_base
    copy.is_keyframe = packet.is_keyframe
    return copy


def ffmpeg_reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return str(text).split(":")[0] if text else type(exc).__name__
