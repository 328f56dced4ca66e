"""One camera of a run (:class:`Camera`): its stages, queues and threads.

``reader`` pulls compressed units from the source, ``decoder`` turns them into frames,
``worker`` pushes frames through the stages (:class:`pipeline.executor.GraphExecutor`);
``sync_loop`` (:mod:`pipeline.camera_sync`) does all three on one thread with one request per
stage (the baseline).
Failures follow the stages' error policy and are reported in one line.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any, Callable

from .arbiter import LEVELS, SourcePriority
from .camera_sync import sync_loop
from .executor import GraphExecutor
from .frame import Frame
from .graph import PipelineGraph
from .left_readers import Stopped, leave
from .priority import NiceGroup
from .queues import EMPTY, BoundedQueue, Closed, file_frames_depth
from .redact import redact
from .run_options import RunOptions, StageFailure
from .stage import InferStage
from .stage_errors import StageErrorPolicy, one_line_error
from .stats import LatencyStats, SourceStats
from .thread_cpu import ffmpeg_decoder_threads

__all__ = ["Camera"]

log = logging.getLogger("vapipe")
_END = object()  # the end of a queue's items
#: decoded frames a live camera keeps while its worker is busy (beyond them the oldest is dropped).
#: A ``high`` priority camera keeps more: a stall of the host delays its frames rather
#: than losing them (at 1.5x the capacity of a 2-core AMD EPYC Zen 5, ``bench.priorities``, one
#: run in about 90 held the high camera up for 25-30 ms, and it dropped 2 frames of 2 kept)
LIVE_FRAMES = 2
LIVE_FRAMES_URGENT = 4


class Camera:
    def __init__(self, graph: PipelineGraph, uri: str, source_id: str, opts: RunOptions,
                 stop_sources: threading.Event, abort: threading.Event,
                 stage_stats: dict[str, LatencyStats], report_failure: Callable[[str], None],
                 priority: SourcePriority | None = None, own: dict[str, dict[str, Any]] | None = None) -> None:
        self.graph = graph
        self.opts = opts
        self.uri = uri
        self.source_id = source_id
        self.stop_sources = stop_sources
        self.abort = abort
        self.stage_stats = stage_stats
        self.report_failure = report_failure
        overrides = {k: dict(v) for k, v in opts.overrides.items()}
        for name, params in (own or {}).items():  # this camera's own overrides
            overrides.setdefault(name, {}).update(params)
        overrides.setdefault(graph.source, {})["uri"] = uri
        for name, requests in opts.user_requests(graph).items():
            overrides.setdefault(name, {})["requests"] = requests
        self.stages = graph.instantiate(overrides)
        self.output_dir = opts.output_dir
        for st in self.stages.values():
            st.source_id = source_id
            st.output_dir = opts.output_dir  # type: ignore[attr-defined]
            st.source_uri = uri  # type: ignore[attr-defined]  # sinks never write over it
        self.source = self.stages[graph.source]
        self.priority = priority
        if priority is not None:
            priority.name = source_id
            for st in self.stages.values():
                if isinstance(st, InferStage):
                    st.priority = priority
        # Convert each frame to full-size BGR once, on the decoder thread, when any
        # stage reads full-resolution pixels; otherwise stages scale from the planes.
        self.needs_image = any(st.needs_image for st in self.stages.values())
        self.stats = SourceStats(source_id)
        self.halt_reading = threading.Event()
        self._read_thread: threading.Thread | None = None
        self._reader_left = False  # stopping no longer waits for the reader thread
        self.live = bool(getattr(self.source, "live", False))
        if self.live:
            # A camera does not wait: packets queue generously (dropping packets breaks
            # decoding until the next keyframe), decoded frames keep only the newest.
            is_marker = getattr(self.source, "is_marker", lambda unit: unit is None)
            self.units = BoundedQueue(256, "drop_oldest", self.halt_reading,
                                      keep=lambda unit: unit is _END or is_marker(unit))
            depth = LIVE_FRAMES_URGENT if priority is not None and priority.level == LEVELS[0] else LIVE_FRAMES
            self.frames = BoundedQueue(depth, "drop_oldest", abort, keep=lambda item: item is _END)
        else:
            self.units = BoundedQueue(opts.queue_size, "block", self.halt_reading)
            self.frames = BoundedQueue(max(2, opts.queue_size // 2), "block", abort)
        if hasattr(self.source, "on_event"):
            self.source.on_event = self._on_source_event
        if hasattr(self.source, "stop_event"):
            self.source.stop_event = self.halt_reading
        self._executor: GraphExecutor | None = None  # the worker's (sync_loop's), for the frames passed
        self.errors = StageErrorPolicy(graph, self.stages, source_id, self.stats,
                                       lambda name: self._executor.passed.get(name, 0) if self._executor else 0)
        self.multi_camera = False
        #: the decoders this one is lowered and raised with while ahead (the session gives
        #: every camera of a run the same one, with the thread plan's nice value; 0: never lowered)
        self.decoder_group = NiceGroup(0)
        self.native_ids: dict[str, int] = {}  # thread role (read, decode, work, sync) -> OS thread id
        self.exit_cpu: dict[int, float] = {}  # OS thread id -> its CPU seconds when it ended
        #: FFmpeg's frame threads (OS thread id -> CPU seconds) when the decoder thread ended
        self.exit_codec_cpu: dict[int, float] = {}
        #: called on the worker thread with (source_id, frame) for every frame leaving the graph
        self.on_frame: Callable[[str, Frame], None] | None = None

    # error policy ------------------------------------------------------------------
    def on_error(self, stage_name: str, exc: BaseException, frame: Frame | None) -> bool:
        """The stage's error policy (:class:`pipeline.stage_errors.StageErrorPolicy`)."""
        return self.errors.handle(stage_name, exc)

    # threads -------------------------------------------------------------------------
    def open(self) -> None:
        """Open every stage in graph order; :class:`Stopped` once reading was halted (a stop
        while an earlier stage opened: the later ones, e.g. model compiles, are not done)."""
        for name, st in self.stages.items():
            if self.halt_reading.is_set():
                raise Stopped(f"source {self.source_id!r} was stopped while it opened")
            try:
                st.ensure_open()
            except Exception as exc:  # noqa: BLE001
                raise StageFailure(one_line_error(exc, f"stage {name!r} on source {self.source_id!r}")) from exc
            if st is self.source:
                rate = getattr(st, "frame_rate", None)
                for other in self.stages.values():
                    if hasattr(other, "source_fps"):
                        other.source_fps = rate
        self.stats.total = getattr(self.source, "total_frames", None)

    def close(self) -> None:
        """Close every stage; the first that fails becomes the source's error (an output not
        finished fails the run) unless the source already failed, then it is logged."""
        for name in self.graph.order:
            try:
                self.stages[name].close()
            except Exception as exc:  # noqa: BLE001 - close everything, report the first
                msg = one_line_error(exc, f"closing stage {name!r} on source {self.source_id!r}")
                if self.stats.error is None:
                    self.stats.error = msg
                else:
                    log.error("%s", msg)

    def collect_counters(self) -> None:
        """Each stage's totals (Stage.counters) into the source's summary."""
        for name, st in self.stages.items():
            try:
                counts = st.counters()
            except Exception as exc:  # noqa: BLE001 - a counter must never fail the run
                log.warning("counters of stage %r on %r failed: %s", name, self.source_id, exc)
                continue
            if counts:
                self.stats.counters[name] = counts

    def _take(self, frame: Frame) -> bool:
        """Count a decoded frame; False once ``max_frames`` is reached.

        Frames a live source dropped (pipeline behind) do not count: ``max_frames`` is
        the number of frames that go through the stages.
        """
        limit = self.opts.max_frames
        if limit is not None and self.stats.decoded - self.frames.dropped >= limit:
            self.halt_reading.set()
            return False
        self.stats.decoded += 1
        if self.stats.decoded == 1 and not self.live:  # sized by the first frame's pixels
            self.frames.maxsize = file_frames_depth(frame.width, frame.height, self.needs_image, self.frames.maxsize)
        return True

    def _decode(self, unit: Any) -> list[Frame]:
        """Frames of one unit (traced when a tracer is set)."""
        tracer = self.opts.trace
        t0 = tracer.now() if tracer is not None else 0
        decoded = self.source.decode_unit(unit)  # type: ignore[attr-defined]
        if tracer is not None and decoded:
            tracer.slice(self.source_id, "decode", f"frame {decoded[0].seq}", t0, tracer.now(),
                         seq=[f.seq for f in decoded])
        return decoded

    def _delay(self) -> None:
        if self.opts.capture_delay_ms > 0:
            time.sleep(self.opts.capture_delay_ms / 1000.0)

    def reader(self) -> None:
        self.native_ids["read"] = threading.get_native_id()
        try:
            tracer = self.opts.trace
            index = 0
            t0 = tracer.now() if tracer is not None else 0
            for unit in self.source.units():  # type: ignore[attr-defined]
                if self.halt_reading.is_set() or self.stop_sources.is_set() or self.abort.is_set():
                    break
                if unit is not None:
                    self._delay()
                    if tracer is not None:
                        tracer.slice(self.source_id, "capture", f"unit {index}", t0, tracer.now(), unit=index)
                        index += 1
                self.units.put(unit)
                t0 = tracer.now() if tracer is not None else 0
        except Closed:
            pass
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "source")
        finally:
            self.units.put_final(_END)

    def decoder(self) -> None:
        self.native_ids["decode"] = threading.get_native_id()
        priority = self.decoder_group.join(self.frames)
        # FFmpeg starts a decoder's frame threads with its first frames (a new decoder after a
        # reconnect or a file's loop: new ones); with threads > 1 they do the decoding, so they go
        # down and up with this thread (another decoder's, started at the same moment, may be
        # counted in: the decoders of a run go together anyway)
        frame_threads: set[int] | None = set(ffmpeg_decoder_threads())
        try:
            while True:
                try:
                    unit = self.units.get()
                except Closed:
                    break
                if unit is _END:
                    self._note_missing_frames()
                    break
                if switch := self.source.starts_decoder(unit):  # type: ignore[attr-defined]
                    frame_threads = set(ffmpeg_decoder_threads())
                decoded = self._decode(unit)
                if frame_threads is not None and decoded and not switch:
                    priority.add_helpers(sorted(set(ffmpeg_decoder_threads()) - frame_threads))
                    frame_threads = None
                for frame in decoded:
                    if not self._take(frame):
                        break
                    if self.needs_image:
                        frame.image()
                    self.frames.put(frame)
                    priority.after_put()
                if self.halt_reading.is_set() and not len(self.units):
                    break
        except Closed:
            pass
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "decoder")
        finally:
            priority.leave()
            self.stats.decoder_priority_changes = priority.changes
            self.halt_reading.set()
            self.frames.put_final(_END)

    def worker(self) -> None:
        self.native_ids["work"] = threading.get_native_id()
        executor = GraphExecutor(self.graph, self.stages, not self.opts.sync, self.stage_stats,
                                 self._output, self.on_error, self.opts.trace, self.source_id)
        self._executor = executor
        try:
            while True:
                try:
                    # While frames are in flight, wake up often to hand finished ones on
                    # (a live camera may not send the next frame for a while).
                    frame = self.frames.get(give_up_after=0.002 if executor.in_flight else None)
                except Closed:
                    return
                if frame is EMPTY:
                    executor.poll()
                    continue
                if frame is _END:
                    executor.finish()
                    return
                executor.feed(frame)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "worker")
        finally:
            self.halt_reading.set()
            self.stats.ended = time.monotonic()

    def _note_missing_frames(self) -> None:
        """At the end of a source that was read to its end: count the frames its header
        announced that never came (a file cut short), beyond 1 % or 2 frames."""
        stopped = self.halt_reading.is_set() or self.stop_sources.is_set() or self.abort.is_set()
        total, got = self.stats.total, self.stats.decoded
        start = getattr(getattr(self.source, "params", None), "start_frame", 0) or 0
        if not stopped and self.stats.error is None and got == 0 and start > 0:
            log.warning("source %r: no frame from start_frame %d on (past its end?)", self.source_id, start)
            return
        if stopped or self.live or self.stats.error is not None or not total or total - got <= max(2, total // 100):
            return  # a live source drops what the pipeline cannot take (counted): nothing was cut short
        self.stats.missing_frames = total - got
        log.warning("source %r ended after %d of the %d frames it announced (file cut short?)",
                    self.source_id, got, total)

    def _output(self, frame: Frame) -> None:
        self.stats.frame_out(frame.captured_ns, frame.seq)
        if self.on_frame is not None:
            self.on_frame(self.source_id, frame)

    def _on_source_event(self, state: str, info: dict[str, Any]) -> None:
        """A live source changed state: count it, log it, and write it to the sinks (a camera's
        password in a reason is written as ``***``)."""
        if "reason" in info:
            info = {**info, "reason": redact(str(info["reason"]))}
        self.stats.note_state(state, str(info["reason"]) if "reason" in info else None)
        level = logging.WARNING if state in ("stalled", "gave_up", "reconnecting") else logging.INFO
        log.log(level, "source %r: %s%s", self.source_id, state,
                "".join(f", {k}={v}" for k, v in info.items()))
        for st in self.stages.values():
            write = getattr(st, "write_event", None)
            if write is not None:
                try:
                    write(state, **info)
                except Exception as exc:  # noqa: BLE001 - an event must never stop a camera
                    log.debug("writing event to %s failed: %s", st.name, exc)

    def _fail(self, exc: BaseException, where: str) -> None:
        if isinstance(exc, StageFailure):
            msg = str(exc)
        else:
            msg = one_line_error(exc, f"{where} of source {self.source_id!r}")
        msg = redact(msg)  # the summary, the status and the records show it
        if self.stats.error is None:
            self.stats.error = msg
        log.debug("failure in %s of %s", where, self.source_id, exc_info=exc)
        if where in ("source", "decoder") and self.multi_camera:
            # one camera's source failing does not stop the others; the run still reports it
            log.error("source %r stopped: %s", self.source_id, msg)
            self.halt_reading.set()
            return
        self.report_failure(msg)

    def threads(self, prefix: str = "") -> list[threading.Thread]:
        """The camera's threads, not started, named ``{prefix}{source_id}:{job}``."""
        name = prefix + self.source_id
        if self.opts.sync:
            return [threading.Thread(target=self._timed(partial(sync_loop, self), True), name=f"{name}:sync",
                                     daemon=True)]
        self._read_thread = threading.Thread(target=self._timed(self.reader), name=f"{name}:read", daemon=True)
        return [self._read_thread,
                threading.Thread(target=self._timed(self.decoder, True), name=f"{name}:decode", daemon=True),
                threading.Thread(target=self._timed(self.worker), name=f"{name}:work", daemon=True)]

    def waits_for(self, thread: threading.Thread) -> bool:
        """Whether stopping this camera waits for ``thread``: not for its reader once reading
        is halted while the source waits in a read that ends alone (its read timeout) and
        then closes what it read (``SourceStage.in_read``)."""
        if thread is not self._read_thread:
            return True
        if not self._reader_left and self.halt_reading.is_set() and getattr(self.source, "in_read", False):
            self._reader_left = True  # for good: closing the source forgets what it reads
            leave(thread)
        return not self._reader_left

    def _timed(self, body: Callable[[], None], decodes: bool = False) -> Callable[[], None]:
        """``body``, keeping the thread's CPU time when it ends (``exit_cpu``) and, for the thread
        that decodes, that of FFmpeg's frame threads (``exit_codec_cpu``), for the plan check."""
        def run() -> None:
            try:
                body()
            finally:
                self.exit_cpu[threading.get_native_id()] = time.thread_time()
                if decodes:
                    self.exit_codec_cpu.update(ffmpeg_decoder_threads())
        return run

