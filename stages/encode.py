"""Video file sink: draws the detections and encodes frames with PyAV.

Contract
--------
* One output file per camera, named by the ``path`` template (see
  :mod:`stages._paths`).  The container is opened on the first frame; its
  size is ``width``/``height`` when set (the frames are scaled, and drawn on
  at that size), else that frame's size, rounded up to even numbers (4:2:0
  chroma needs even sizes): an odd last column/row is padded by repeating the
  edge.  Frames of another size later in the stream are scaled to the file's size.
* The frame's own pixels are never changed: drawing happens on a copy.  The
  frame is returned so further sinks can follow.
* Timing: output timestamps use a 90 kHz clock (60 kHz or 1/rate for encoders
  that cannot take it) and start at 0.  With frame
  timestamps (``pts``/``time_base``) the output follows them; without, it
  follows ``seq`` at the nominal rate (``fps``, else ``source_fps`` set by the
  runtime, else 25).  Timestamps never repeat or go back, and the last frame
  lasts one frame interval: the median of the latest intervals between timestamps,
  else one at the nominal rate (:class:`stages._output_clock.OutputClock`).
* Every processed frame is written (``frames_written`` counts them).
* :meth:`close` flushes the encoder and closes the container, so the file is
  playable after normal ends, errors and signals.  It may run more than once,
  from another thread, or from a signal handler that interrupted
  :meth:`process`; frames that arrive after it are passed on but not written
  (until the stage is opened again, which starts a new file).
"""

from __future__ import annotations

import logging
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, ClassVar

import av
import cv2
import numpy as np
from pydantic import Field, field_validator, model_validator

from pipeline.frame import OVERLAY, Frame, attr_values
from pipeline.frame_view import SINK_VIEW_HELP, SinkView, TransformedFrame, sink_picture
from pipeline.geometry import scaled_size
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage, StageError

from ._encoder_options import opens_without_options, private_options, shown
from ._output_clock import OutputClock, frame_timing, set_frame_timing
from ._paths import PathTemplate, check_output, claim, release, resolve_output
from .annotate import Annotator, Shape, annotate_all, default_annotators, draw_outline, draw_shapes, scale_detections

__all__ = ["Encode", "TIME_BASE"]

log = logging.getLogger(__name__)

TIME_BASE = Fraction(1, 90_000)  # output clock (encoder and packet timestamps)
FALLBACK_TIME_BASE = Fraction(1, 60_000)  # for encoders limited to 16-bit clocks
DEFAULT_FPS = 25.0
_COMMON_ENCODERS = ("libx264", "libx265", "libvpx-vp9", "libaom-av1", "libsvtav1", "mpeg4", "mjpeg")


class Encode(Stage):
    """Writes annotated frames to a video file (sink that passes frames on)."""

    needs_image = True

    kind: ClassVar[str] = "sink"

    class Params(StageParams):
        path: PathTemplate = Field("{output}/{source}.mp4", description="output file template: {output}, "
                                   "{source}, {name}")
        codec: str = Field("libx264", description="FFmpeg encoder name")
        crf: int = Field(23, ge=0, le=63, description="constant rate factor (encoders that support it)")
        preset: str = Field("veryfast", description="encoder speed preset (encoders that support it)")
        pix_fmt: str = Field("yuv420p", description="pixel format of the file")
        annotate: bool = Field(True, description="draw boxes, keypoints and text before encoding")
        threads: int = Field(0, ge=0, description="encoder threads; 0 = codec default")
        width: int | None = Field(None, ge=2, le=16384, description="width of the video written; with height "
                                  "unset, the height follows the aspect ratio (rounded to even); default: the "
                                  "frame's width")
        height: int | None = Field(None, ge=2, le=16384, description="height of the video written (e.g. 720 for "
                                   "a 4K camera: a ninth of the pixels to encode); with width unset, the width "
                                   "follows the aspect ratio (rounded to even); default: the frame's height")
        fps: float | None = Field(None, gt=0, description="nominal rate in frames/s: clock for frames "
                                  "without timestamps and the encoder's rate hint; None = source_fps or 25")
        view: SinkView = Field("source", description=SINK_VIEW_HELP + "; a crop is outlined on the source")
        container_options: dict[str, str] = Field(default_factory=dict, description="FFmpeg muxer options, "
                                                  "e.g. {movflags: +frag_keyframe+empty_moov} for an MP4 that "
                                                  "stays playable if the process is killed")

        @field_validator("codec")
        @classmethod
        def _an_encoder_ffmpeg_has(cls, codec: str) -> str:
            try:
                found = av.codec.Codec(codec, "w")
            except (av.FFmpegError, ValueError):
                found = None
            if found is None or found.type != "video":
                known = [c for c in _COMMON_ENCODERS if c in av.codecs_available]
                raise ValueError(f"{codec!r} is not a video encoder of this FFmpeg; for example {', '.join(known)} "
                                 "(`ffmpeg -encoders` lists them)")
            return codec

        @model_validator(mode="after")
        def _a_pixel_format_the_encoder_takes(self) -> "Encode.Params":
            formats = [f.name for f in (av.codec.Codec(self.codec, "w").video_formats or [])]
            if not formats:
                return self
            if "pix_fmt" not in self.model_fields_set:
                # the default, unless the encoder wants another: MJPEG full-range 4:2:0 (it refuses
                # yuv420p without a "strict" option, as FFmpeg's own tool knows), others their first
                if formats[0] == "yuvj420p" or self.pix_fmt not in formats:
                    self.pix_fmt = formats[0]
            elif self.pix_fmt not in formats:
                raise ValueError(f"pix_fmt {self.pix_fmt!r} is not a format {self.codec!r} encodes; valid: "
                                 f"{', '.join(formats)}")
            return self

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.output_dir: Path | None = None  # set by the runtime
        self.source_fps: float | None = None  # optional hint from the runtime
        self.annotators: list[Annotator] = default_annotators()
        # Written at its own size, a frame is scaled from the decoder's picture: no full-size
        # BGR conversion on the decoder thread for this stage.
        self.needs_image = not self._scaled  # type: ignore[misc]
        self.path: Path | None = None
        self.frames_written = 0
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._container: Any = None
        self._stream: Any = None
        self._size: tuple[int, int] = (0, 0)  # (width, height) of the file
        self._clock: OutputClock | None = None  # the file's timestamps, from its first frame
        self._busy = False
        self._close_pending = False
        self._finished = False
        self._late_logged = False

    # lifecycle ------------------------------------------------------------------
    def output_file(self) -> Path:
        return check_output(self.params.path, self)

    def open(self) -> None:
        """Ready for a new file (written from the first frame on); its path is checked now."""
        check_output(self.params.path, self)
        with self._lock:
            if self._container is not None:
                self._finalise()
            self._reset()
            self.frames_written = 0
            self.path = None

    def planning_cost(self, source_wh: tuple[int, int]) -> tuple[str, Callable[[], float]]:
        """(cost-cache key, measurement) of encoding one frame of ``source_wh`` on one thread
        (at the size written: ``width``/``height`` when set)."""
        from pipeline.measure import measure_encode

        p = self.params
        w, h = self._file_size(source_wh)
        key = f"encode|{p.codec}|{p.preset}|{p.crf}|{p.pix_fmt}|{w}x{h}"

        def measure() -> float:
            supported = private_options(av.CodecContext.create(p.codec, "w"))
            options = {k: v for k, v in {"crf": str(p.crf), "preset": p.preset}.items() if k in supported}
            return measure_encode(w, h, p.codec, options, p.pix_fmt)

        return key, measure

    def process(self, frame: Frame) -> Frame | None:
        with self._lock:
            if self._finished:
                if not self._late_logged:
                    self._late_logged = True
                    log.debug("%s: %s is closed; later frames are passed on unwritten", self.name, self.path)
                return frame
            self._busy = True
            try:
                self._write(frame)
            finally:
                self._busy = False
                if self._close_pending:
                    self._finalise()
        return frame

    def close(self) -> None:
        """Flush the encoder and close the file; safe to call again or re-entrantly."""
        with self._lock:
            if self._busy:  # re-entered from a signal handler during process()
                self._close_pending = True
                return
            self._finalise()

    # internals ------------------------------------------------------------------
    @property
    def nominal_fps(self) -> float:
        return float(self.params.fps or self.source_fps or DEFAULT_FPS)

    def _write(self, frame: Frame) -> None:
        shapes = [s for shapes in attr_values(frame, OVERLAY) for s in shapes] if self.params.annotate else []
        view = frame
        frame, outline = sink_picture(frame, self.params.view)
        if shapes and frame is not view and isinstance(view, TransformedFrame):  # stages drew in the view's pixels
            shapes = [s.mapped(view.geometry.to_source) for s in shapes]
        if self._container is None:
            self._start(frame)
        vframe, borrowed = self._video_frame(frame, outline, shapes)
        saved = frame_timing(vframe) if borrowed else None
        clock = self._clock
        assert clock is not None
        pts = clock.next_pts(frame)
        before = clock.last_pts, self.frames_written
        # Count first and mux in ``finally``: an exception raised by a signal
        # handler right after encode() must not lose packets the encoder emitted.
        clock.last_pts, self.frames_written = pts, self.frames_written + 1
        packets: list[Any] = []
        try:
            set_frame_timing(vframe, (pts, clock.time_base, clock.interval))
            packets = self._stream.encode(vframe)
        except av.FFmpegError as exc:
            clock.last_pts, self.frames_written = before
            raise StageError(f"{self.name}: encoding frame {frame.source_id}#{frame.seq} failed: {exc}") from exc
        finally:
            if saved is not None:
                set_frame_timing(vframe, saved)
            if packets:
                self._mux(self._container, packets)

    @property
    def _scaled(self) -> bool:
        """The file's size is set by ``width``/``height``, not by the first frame."""
        return self.params.width is not None or self.params.height is not None

    def _file_size(self, frame_wh: tuple[int, int]) -> tuple[int, int]:
        """(width, height) of the file for a first frame of ``frame_wh``: ``width``/``height``, else
        the frame's size, rounded up to even numbers."""
        p = self.params
        w, h = scaled_size(frame_wh, p.width, p.height) if self._scaled else frame_wh
        return w + w % 2, h + h % 2

    def _start(self, frame: Frame) -> None:
        self.path = resolve_output(self.params.path, self)
        claim(self.path, self)  # before the file is opened: another sink's is not truncated
        try:
            self._open_file(frame)
        except BaseException:
            release(self.path, self)
            raise

    def _open_file(self, frame: Frame) -> None:
        p = self.params
        width, height = self._file_size((frame.width, frame.height))
        rate = Fraction(self.nominal_fps).limit_denominator(100_000)
        try:  # FFmpeg opens the file only when the first packet is muxed: fail here, naming it
            self.path.open("wb").close()
        except OSError as exc:
            raise StageError(f"{self.name}: cannot write {self.path}: {exc.strerror or exc}") from None
        error: Exception | None = None
        # 90 kHz first; MPEG-4 part 2 style encoders cap the clock at 65535 Hz,
        # some legacy ones only take 1/rate.
        for tb in dict.fromkeys((TIME_BASE, FALLBACK_TIME_BASE, 1 / rate)):
            try:
                container = av.open(str(self.path), mode="w",
                                    container_options={str(k): str(v) for k, v in p.container_options.items()})
            except (av.FFmpegError, ValueError) as exc:  # the extension names no container FFmpeg writes
                self.path.unlink(missing_ok=True)
                raise StageError(f"{self.name}: cannot write {self.path}: {exc} (the container follows the "
                                 "file's extension: .mp4, .mkv, .mov, .avi, .ts)") from None
            stream = None
            try:
                stream = container.add_stream(p.codec, rate=rate)
                stream.width, stream.height = width, height
                stream.pix_fmt = p.pix_fmt
                stream.codec_context.time_base = tb
                stream.time_base = tb
                if p.threads:
                    stream.codec_context.thread_count = p.threads
                wanted = {"crf": str(p.crf), "preset": p.preset}
                supported = private_options(stream.codec_context)
                stream.options = {k: v for k, v in wanted.items() if k in supported}
                stream.codec_context.open()
            except (av.FFmpegError, ValueError, TypeError) as exc:
                container.close()
                if error is None and stream is not None and stream.options and opens_without_options(stream, tb):
                    self.path.unlink(missing_ok=True)  # the options are at fault: one message, not one per clock
                    raise StageError(f"{self.name}: {p.codec!r} refused {shown(stream.options)}: "
                                     f"{getattr(exc, 'strerror', None) or exc}") from None
                error = exc
                continue
            self._write_header(container)
            self._container, self._stream, self._size = container, stream, (width, height)
            self._clock = OutputClock(frame, tb, self.nominal_fps, self.name)
            return
        self.path.unlink(missing_ok=True)
        raise StageError(f"{self.name}: cannot set up {p.codec!r} ({p.pix_fmt}, {width}x{height}) "
                         f"for {self.path}: {error}") from error

    def _write_header(self, container: Any) -> None:
        """Write the file's header now (FFmpeg would at the first packet, a dozen frames in): the
        muxer's options are checked before any frame is taken."""
        try:
            container.start_encoding()
        except (av.FFmpegError, ValueError) as exc:
            container.close()
            self.path.unlink(missing_ok=True)
            options = shown(self.params.container_options) or "its defaults"
            raise StageError(f"{self.name}: the {container.format.name} muxer refused {options} for "
                             f"{self.path}: {getattr(exc, 'strerror', None) or exc}") from None

    def _video_frame(self, frame: Frame, outline: np.ndarray | None = None,
                     shapes: list[Shape] | None = None) -> tuple[Any, bool]:
        """An ``av.VideoFrame`` to encode, and whether it is the frame's own decoder frame;
        ``outline``: a region to outline, ``shapes``: what stages asked to draw (frame pixels)."""
        shapes = shapes or []
        w, h = self._size
        draw = self.params.annotate and (len(frame.detections) > 0 or outline is not None or bool(shapes))
        src = frame.av_frame
        fresh = src is not None and not frame.has_image  # the decoder's picture, not converted yet
        if not draw and fresh and (src.width, src.height) == (w, h):
            return src, True  # no conversion to BGR and back
        iw, ih = frame.width, frame.height
        scale: tuple[float, float] | None = None  # drawing at another size than the frame's
        if fresh and self._scaled and (iw, ih) != (w, h):
            # scaled (and converted) by FFmpeg's scaler, without a full-size BGR frame
            if not draw:
                return src.reformat(width=w, height=h, format=self._stream.pix_fmt, interpolation="AREA"), False
            image = np.ascontiguousarray(src.to_ndarray(format="bgr24", width=w, height=h, interpolation="AREA"))
            scale = (w / iw, h / ih)
        else:
            image = frame.image()
            ih, iw = image.shape[:2]
            if (iw, ih) == (w, h):
                image = image.copy() if draw else image
            elif (iw + iw % 2, ih + ih % 2) == (w, h) and not self._scaled:
                image = cv2.copyMakeBorder(image, 0, h - ih, 0, w - iw, cv2.BORDER_REPLICATE)
            else:  # scaled output, or the size changed mid-stream
                image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
                scale = (w / iw, h / ih)
        if draw:
            detections = frame.detections
            if scale is not None:  # what stages give in frame pixels, in the picture's
                sx, sy = scale
                detections = scale_detections(detections, sx, sy)
                outline = None if outline is None else outline * np.array([sx, sy], np.float32)
                shapes = [s.mapped(lambda p: p * [sx, sy]) for s in shapes]
            annotate_all(image, detections, self.annotators)
            if outline is not None:
                draw_outline(image, outline)
            draw_shapes(image, shapes)
        return av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24"), False

    def _mux(self, container: Any, packets: list[Any]) -> None:
        """Mux the encoder's ``packets``; one without a duration lasts one frame interval (the
        container takes the last frame's duration from its packet)."""
        interval = self._clock.interval if self._clock is not None else 0
        for packet in packets:
            if not packet.duration:
                packet.duration = interval
        container.mux(packets)

    def _finalise(self) -> None:
        self._finished = True
        container, stream = self._container, self._stream
        self._container = self._stream = None
        if container is None:
            return
        release(self.path, self)
        try:
            if self.frames_written:
                self._mux(container, stream.encode(None))
        finally:
            container.close()
            if not self.frames_written and self.path is not None:
                self.path.unlink(missing_ok=True)  # nothing playable was written

