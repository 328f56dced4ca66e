"""The source stage: video files, streams and cameras (PyAV), image folders and
synthetic ``testsrc://`` scenes.

Reading is split in two steps so that the runtime can run them on two threads:
:meth:`Decode.units` yields compressed units (packets, image paths, scene
indices) as they arrive, and :meth:`Decode.decode_unit` turns a unit into
frames.  Decoded frames keep the decoder's pixel format; stages ask the frame
for the pixels they need (see :class:`pipeline.frame.Frame`).

Live sources (``rtsp://``, ``http(s)://``, ``/dev/videoN``, ...) never end on
their own: when a camera cannot be reached, stops sending (read timeout) or
sends too many undecodable packets in a row, the stage reconnects with
exponential backoff and reports each state change (connecting, streaming,
stalled, reconnecting, gave_up, ended) through :attr:`Decode.on_event`.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.frame import RECORD, Frame
from pipeline.left_readers import Stopped, run_unless_stopped
from pipeline.redact import redact
from pipeline.source_names import source_ids
from pipeline.stage import Params, SourceStage

from .sources import (IMAGE_SUFFIXES, LOOP, VIDEO_SUFFIXES, FolderReader, Reader, SceneReader, SourceError,
                      VideoReader, is_live_uri)
from .sources.pacing import Pacer, packet_time

__all__ = ["Decode", "SourceError", "IMAGE_SUFFIXES", "VIDEO_SUFFIXES", "LOOP", "Reconnect", "STATES"]

log = logging.getLogger("vapipe.source")

#: a replaced stream reader is closed this long after the switch (its frames have left by then)
RETIRE_AFTER_S = 3.0
STATES = ("connecting", "streaming", "stalled", "reconnecting", "gave_up", "ended")


class Reconnect(BaseModel):
    """Exponential backoff for live sources: delay = min(max_s, initial_s * 2**attempt) ± jitter."""

    model_config = ConfigDict(extra="forbid")

    initial_s: float = Field(0.5, gt=0)
    max_s: float = Field(30.0, gt=0)
    jitter: float = Field(0.2, ge=0, le=1, description="random fraction added or removed from each delay")
    max_attempts: int | None = Field(None, ge=1, description="give up after this many failed attempts; "
                                     "None = forever")

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * (2 ** min(attempt, 30)))
        return max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))


class _Switch:
    """Unit telling the decoder thread that the reader thread reconnected (``reader``),
    or that the stream it was reading ended (None): the old reader is flushed and retired."""

    __slots__ = ("reader",)

    def __init__(self, reader: Reader | None) -> None:
        self.reader = reader


class Decode(SourceStage):
    """Reads frames from ``uri``: a video file, a stream URL, ``/dev/videoN``, a folder of
    images or ``testsrc://PATTERN``."""

    class Params(Params):
        uri: str = Field("", description="file, stream URL, /dev/videoN, image folder or testsrc://PATTERN "
                                         "(normally given by --source)")
        loop: bool = Field(False, description="start again at the end (timestamps keep increasing)")
        realtime: bool = Field(False, description="deliver frames at the stream's frame rate, as a camera does")
        threads: int = Field(0, ge=0, description="decoder threads; 0 = FFmpeg's automatic choice")
        autorotate: bool = Field(True, description="turn frames upright as the video's display matrix says "
                                 "(phone videos, cameras mounted on their side), as players and FFmpeg show them; "
                                 "false: frames as stored")
        deinterlace: Literal["auto", "on", "off"] = Field(
            "auto", description="deinterlace with FFmpeg's bwdif: auto (once the decoder flags a frame as "
            "interlaced; progressive video is untouched), on (every frame), off")
        square_pixels: bool = Field(True, description="stretch anamorphic video (a sample aspect ratio other "
                                    "than 1:1, e.g. DVB 720x576 at 16:9 or HDV 1440x1080) to square pixels, as "
                                    "players show it; false: frames as stored")
        fps: float = Field(25.0, gt=0, description="frame rate for image folders and synthetic scenes")
        live: bool | None = Field(None, description="drop the oldest frames when the pipeline falls behind and "
                                  "reconnect on failure; default: true for stream URLs and cameras (HLS is then paced "
                                  "at its frame rate and a finished playlist ends at #EXT-X-ENDLIST; false reads "
                                  "a finished playlist as a file: every frame, as fast as possible)")
        transport: Literal["tcp", "udp"] = Field("tcp", description="RTSP transport")
        open_timeout_s: float = Field(10.0, gt=0, description="give up opening a stream after this long")
        read_timeout_s: float = Field(5.0, gt=0, description="a stream that sends nothing this long is stalled")
        reconnect: Reconnect = Field(default_factory=Reconnect)
        max_decode_errors: int = Field(50, ge=1, description="undecodable packets in a row before a live "
                                       "source reconnects")
        start_frame: int = Field(0, ge=0, description="first frame to deliver, 0-based; its seq number, and "
                                 "the numbering goes on from it (files seek to the keyframe before it and decode "
                                 "forward; in a variable-rate file frame N is the one N frames of its average "
                                 "rate after the first; live sources cannot seek: only their numbering starts "
                                 "there)")
        probe_s: float = Field(1.0, gt=0, description="how much of a live stream FFmpeg reads to learn its "
                               "format (analyzeduration); shorter connects faster (measured on RTSP: 2.3 s with "
                               "FFmpeg's default, 1.1 s with 1 s, 0.6 s with 0.5 s)")

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reader: Reader | None = None          # used by the reader thread
        self._decoder: Reader | None = None         # used by the decoder thread
        self._retired: list[tuple[float, Reader]] = []  # replaced readers, closed a while later
        self._retired_lock = threading.Lock()  # both threads close expired readers
        self._continue_at: float | None = None  # timestamps of the next reader continue from here
        self._seq = 0
        self._name = ""  # frames' source_id outside the runtime (which sets source_id): as the runtime names it
        self._reconnect_requested = False
        self._fps_noted = False  # the warning that fps is not used here was given
        self.decode_errors = 0
        #: called as on_event(state, info) on every state change of a live source
        self.on_event: Callable[[str, dict[str, Any]], None] | None = None
        #: set by the runtime when the run stops; interrupts backoff waits
        self.stop_event = threading.Event()

    @property
    def uri(self) -> str:
        return self.params.uri

    @property
    def can_probe(self) -> bool:  # type: ignore[override]
        return not is_live_uri(self.params.uri)

    @property
    def live(self) -> bool:  # type: ignore[override]
        p = self.params
        return p.live if p.live is not None else is_live_uri(p.uri)

    def open(self) -> None:
        uri = self.params.uri
        if not uri:
            raise SourceError("no source given; pass --source FILE|URL|FOLDER|testsrc://PATTERN")
        self._seq = self.params.start_frame
        self._name = source_ids([uri])[0]
        self.decode_errors = 0
        if uri.startswith("testsrc://"):
            self._reader = SceneReader(uri, self.params.fps)
        elif os.path.isdir(uri):
            self._reader = FolderReader(Path(uri), self.params.fps)
        elif self.live:
            self._reader = None  # connected (and reconnected) by units()
        else:
            self._reader = self._open_video()
        if not isinstance(self._reader, (SceneReader, FolderReader)) and "fps" in self.params.model_fields_set \
                and not self._fps_noted:
            self._fps_noted = True  # once, not at every loop or reconnect
            log.warning("%s: fps %g is not used for %s: a video or stream keeps its own timestamps (fps sets the "
                        "rate of image folders and testsrc scenes)", self.name, self.params.fps, redact(uri))
        if self._reader is not None and self.params.start_frame:
            self._reader.start_at(self.params.start_frame)
        self._decoder = self._reader

    def _open_video(self) -> VideoReader:
        p = self.params
        options = {"rtsp_transport": p.transport} if p.uri.lower().startswith("rtsp") else {}
        if self.live and "://" in p.uri:
            options.update(analyzeduration=str(int(p.probe_s * 1e6)), probesize="500000")
        return VideoReader(p.uri, p.threads, (p.open_timeout_s, p.read_timeout_s), options, stop=self.stop_event,
                           autorotate=p.autorotate, deinterlace=p.deinterlace,
                           square_pixels=p.square_pixels)

    def close(self) -> None:
        with self._retired_lock:
            retired, self._retired = self._retired, []
        readers = [r for r in (self._reader, self._decoder) if r is not None] + [r for _, r in retired]
        for reader in {id(r): r for r in readers}.values():
            reader.close()
        self._reader = self._decoder = None

    def _close_expired(self) -> None:
        """Close the readers retired more than ``RETIRE_AFTER_S`` ago (from either thread)."""
        now = time.monotonic()
        with self._retired_lock:
            expired = []
            while self._retired and now - self._retired[0][0] > RETIRE_AFTER_S:
                expired.append(self._retired.pop(0)[1])
        for reader in expired:
            reader.close()

    @property
    def in_read(self) -> bool:  # type: ignore[override]
        reader = self._reader
        return reader is not None and reader.reading

    @property
    def total_frames(self) -> int | None:  # type: ignore[override]
        """Frames in one pass of the source, if known (for progress bars)."""
        return None if self._reader is None or self.params.loop else self._reader.total_frames

    @property
    def frame_rate(self) -> float | None:
        return None if self._reader is None else self._reader.frame_rate

    # reader thread ---------------------------------------------------------------------
    def units(self) -> Iterator[Any]:
        """Compressed units in arrival order, ending with None (flush)."""
        if self.live and not isinstance(self._reader, (SceneReader, FolderReader)):
            yield from self._live_units()
        else:  # files; scenes and folders also when live (no connection to make: frames drop when behind)
            yield from self._file_units()
        yield None

    def _file_units(self) -> Iterator[Any]:
        reader = self._reader
        assert reader is not None, "open() first"
        pace = Pacer(self.params.realtime, reader.frame_rate)
        while True:
            for unit in reader.units():
                if self._reader is not reader:  # closed (and maybe opened again): this pass ends
                    return
                pace.wait(reader.unit_time(unit))
                yield unit
            if not self.params.loop or self._reader is not reader:
                return
            if isinstance(reader, VideoReader):
                # Loop by opening the file again and handing the decoder thread the new
                # reader: seeking would flush the codec context that thread is using.
                self._reader = self._open_video()
                last = reader.last_unit_time()
                reader = self._reader
                if last is not None:
                    reader.continue_after(last)  # for pacing; the decoder confirms on the switch
                yield _Switch(reader)
            else:
                yield LOOP  # folders and scenes: the decode step keeps timestamps increasing

    def _live_units(self) -> Iterator[Any]:
        failures = 0  # attempts in a row that brought no media
        while not self.stop_event.is_set():
            if self._reader is None:
                self._event("connecting", attempt=failures + 1)
                try:
                    reader = run_unless_stopped(self._open_video, self.stop_event.is_set, VideoReader.close)
                except Stopped:
                    return
                except SourceError as exc:
                    if self.stop_event.is_set():
                        return
                    failures += 1
                    self._retry_or_give_up(failures, str(exc))
                    continue
                self._reader = reader
                # The decoder thread starts using the new reader here (on a reconnect it also
                # continues the timestamps and closes the old one).
                yield _Switch(reader)
            # A live stream that ends was dropped by its sender: "stalled", as for one that goes
            # quiet; "ended" is final (a finished playlist, or the run's end).
            reason = "stream ended"
            ended = True
            streaming = False
            # HLS arrives in bursts of whole segments; a player spreads them out at the
            # stream's rate, and so does this (a burst would overflow the newest-frames queue).
            pace = Pacer(getattr(self._reader, "segmented", False), self._reader.frame_rate, catch_up=False)
            try:
                for unit in self._reader.units():
                    pace.wait(packet_time(unit))
                    if not streaming:
                        # A camera is back when media arrives, not when the handshake succeeds: a
                        # server that answers and then sends nothing must back off and give up.
                        streaming = True
                        failures = 0
                        self._event("streaming")
                    yield unit
                    if self._reconnect_requested or self.stop_event.is_set():
                        break
                if self._reconnect_requested:
                    reason, ended = f"{self.params.max_decode_errors} undecodable packets in a row", False
            except SourceError as exc:
                reason, ended = str(exc), False
            if self.stop_event.is_set():
                return
            if ended and streaming and getattr(self._reader, "finite", False):
                # Reconnecting to a finished playlist would read it again from the start, at
                # once and forever; it ends here instead (live=false reads every frame of it).
                self._event("ended", reason="end of a finished playlist (#EXT-X-ENDLIST)")
                return
            self._reconnect_requested = False
            self._reader = None
            # The decoder thread flushes the old reader now and closes it a while later; a
            # device that opens only once (a V4L2 camera) opens again after that.
            yield _Switch(None)
            if not streaming:
                failures += 1
                self._retry_or_give_up(failures, f"no media after opening: {reason}")
                continue
            self._event("stalled", reason=reason)

    def _retry_or_give_up(self, failures: int, reason: str) -> None:
        """After a failed attempt: wait the backoff delay, or raise once max_attempts is reached."""
        policy = self.params.reconnect
        if policy.max_attempts is not None and failures >= policy.max_attempts:
            self._event("gave_up", attempts=failures, reason=reason)
            tries = f"{failures} attempt" + ("s" if failures != 1 else "")
            raise SourceError(f"gave up on {self.params.uri} after {tries}: {reason}")
        delay = policy.delay(failures - 1)
        self._event("reconnecting", attempt=failures, delay_s=round(delay, 3), reason=reason)
        self.stop_event.wait(delay)
        self._close_expired()

    def _event(self, state: str, **info: Any) -> None:
        log.info("%s: %s %s", self.params.uri, state, info or "")
        if self.on_event is not None:
            self.on_event(state, info)

    def is_marker(self, unit: Any) -> bool:
        return unit is None or unit is LOOP or isinstance(unit, _Switch)

    def starts_decoder(self, unit: Any) -> bool:
        return isinstance(unit, _Switch) and unit.reader is not None

    # decoder thread --------------------------------------------------------------------
    def decode_unit(self, unit: Any) -> list[Frame]:
        """Frames decoded from one unit (None flushes); ``seq`` numbers are assigned here."""
        if self._retired:
            self._close_expired()
        file = None  # the image file of a folder's frame (one per unit)
        if isinstance(unit, _Switch):
            decoded = self._switch(unit.reader)
        else:
            reader = self._decoder
            if reader is None:
                return []
            errors = reader.decode_errors
            decoded = reader.decode(unit)
            file = reader.last_file
            self.decode_errors += reader.decode_errors - errors
            if self.live and reader.consecutive_errors >= self.params.max_decode_errors:
                reader.consecutive_errors = 0
                self._reconnect_requested = True
        source = self.source_id or self._name
        frames = []
        for av_frame, image, pts, tb in decoded:
            if image is not None:
                f = Frame.from_image(image, source, self._seq, pts, tb)
            else:
                f = Frame(source_id=source, seq=self._seq, width=av_frame.width, height=av_frame.height,
                          pts=pts, time_base=tb, av_frame=av_frame)
            if file is not None:  # records say which image it was
                f.attrs[(self.name, RECORD)] = {"file": file}
            self._seq += 1
            frames.append(f)
        return frames

    def _switch(self, new: Reader | None) -> list:
        old = self._decoder
        flushed = []
        if old is not None:
            try:
                flushed = old.decode(None)
            except Exception:  # noqa: BLE001 - the old stream is gone; its buffered frames may be too
                flushed = []
            self._continue_at = old.last_time()
            if old is not self._reader:
                # Closed later, not now: frames decoded from it may still be in flight
                # downstream (decoded pictures may point into a camera's capture buffers).
                with self._retired_lock:
                    self._retired.append((time.monotonic(), old))
        if new is not None and self._continue_at is not None:
            new.continue_after(self._continue_at)
            self._continue_at = None
        self._decoder = new
        return flushed

