"""Runs a pipeline graph on one or more sources in one process.

Per camera, three threads connected by bounded queues:

* **reader** — pulls compressed units (packets) from the source, as a camera
  delivers them (``capture_delay_ms`` adds latency per unit without CPU);
* **decoder** — turns units into frames;
* **worker** — pushes frames through the stages in topological order.
  Inference stages are asynchronous: the worker submits frame N+1 while
  frame N is still in flight and takes results back in ``seq`` order, so
  decoding and inference overlap and the slowest stage sets the rate.

``sync=True`` runs the same graph on one thread per camera with one infer
request and no overlap (the baseline the asynchronous mode must beat).

Every wait has a timeout and watches an event; a failure anywhere aborts the
run cleanly (stages closed, outputs finalised) with a one-line error.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .frame import Frame
from .graph import PipelineGraph
from .arbiter import SourcePriority
from .priority import YieldWhileAhead
from .queues import EMPTY, BoundedQueue, Closed
from .stage import InferStage, Stage
from .stats import LatencyStats, RunSummary, SourceStats
from .trace import LaneAllocator, Tracer

if TYPE_CHECKING:
    from .session import Session

__all__ = ["RunOptions", "run_pipeline", "GraphExecutor", "StageFailure", "install_signals"]

log = logging.getLogger("vapipe")
_END = object()


class StageFailure(RuntimeError):
    """A stage raised; the message names the stage, the source and the error."""


@dataclass
class RunOptions:
    output_dir: Path = Path("output")
    sync: bool = False
    capture_delay_ms: float = 0.0
    max_frames: int | None = None
    requests: int | None = None            # infer requests per camera for every infer stage
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    queue_size: int = 8
    stop_deadline_s: float = 10.0
    handle_signals: bool = True
    # Python hands the GIL over every 5 ms by default; decoder and inference threads
    # that briefly need it then wait behind the worker (a convoy).  0.5 ms measured
    # +20-30 % FPS on the 1080p persons benchmark (2 cores).
    switch_interval_s: float | None = 0.0005
    trace: "Tracer | None" = None          # timeline of decode, stage and request slices
    cores: int | None = None               # thread budget (pipeline/threads.py); None: the CPU affinity
    replan: bool = False                   # apply a new thread plan when the observed costs call for one
    #: per source (same order): priority on shared models (pipeline/arbiter.py); None: all alike
    priorities: "list[SourcePriority] | None" = None
    #: set from another thread to stop the run as SIGTERM does (frames in flight finish, outputs close)
    stop_event: threading.Event | None = None
    #: per source (same order): its name in outputs and summaries; None: from the URIs (source_ids)
    source_ids: list[str] | None = None
    #: per source (same order): stage overrides for that camera only, over ``overrides``
    #: (e.g. ``{"decode": {"start_frame": 120}}``)
    source_overrides: list[dict[str, dict[str, Any]]] | None = None
    #: run_pipeline calls it with its Session once the sources are open (to add or remove cameras
    #: from another thread while the run goes)
    on_session: "Callable[[Session], None] | None" = None


class GraphExecutor:
    """Pushes frames of one camera through instantiated stages.

    Fan-out: a frame goes to every successor (the same object).  Fan-in: a
    stage with several inputs runs once a frame has arrived on all of them.
    Inference stages run asynchronously (``async_mode``) with up to their
    ``depth`` frames in flight.  Leaves report finished frames to ``on_output``.
    """

    def __init__(self, graph: PipelineGraph, stages: dict[str, Stage], async_mode: bool,
                 stage_stats: dict[str, LatencyStats], on_output: Callable[[Frame], None],
                 on_error: Callable[[str, BaseException, Frame | None], bool],
                 tracer: Tracer | None = None, camera: str = "") -> None:
        self.graph = graph
        self.tracer = tracer
        self.camera = camera
        self._lanes = {n: LaneAllocator() for n in graph.order}
        self._lane_of: dict[tuple[str, int], tuple[int, int]] = {}
        self.stages = stages
        self.async_mode = async_mode
        self.stage_stats = stage_stats
        self.on_output = on_output
        self.on_error = on_error
        g = graph.graph
        self.order = [n for n in graph.order if n != graph.source]
        self.succ = {n: list(g.successors(n)) for n in graph.order}
        self.npred = {n: g.in_degree(n) for n in graph.order}
        self._arrivals: dict[tuple[str, int], int] = {}
        self._submitted: dict[tuple[str, int], int] = {}

    def feed(self, frame: Frame) -> None:
        self._emit(self.graph.source, frame)

    @property
    def in_flight(self) -> int:
        """Frames inside asynchronous stages."""
        return sum(st.in_flight for st in self.stages.values() if isinstance(st, InferStage))

    def poll(self) -> None:
        """Hand on frames that finished since the last call (never blocks)."""
        if self.async_mode:
            self._collect(lambda stage: stage.poll() if stage.in_flight else [])

    def finish(self) -> None:
        """Drain every inference stage in topological order."""
        if self.async_mode:
            self._collect(lambda stage: stage.drain())

    def _collect(self, take: Callable[[InferStage], list[Frame]]) -> None:
        for name in self.order:
            stage = self.stages[name]
            if not isinstance(stage, InferStage):
                continue
            try:
                outs = take(stage)
            except Exception as exc:  # noqa: BLE001 - routed through the error policy
                self.on_error(name, exc, None)
                continue
            for f in outs:
                self._done(name, f)

    def _emit(self, name: str, frame: Frame) -> None:
        succ = self.succ[name]
        if not succ:
            self.on_output(frame)
            return
        for nxt in succ:
            self._push(nxt, frame)

    def _push(self, name: str, frame: Frame) -> None:
        if self.npred[name] > 1:
            key = (name, frame.seq)
            n = self._arrivals.get(key, 0) + 1
            if n < self.npred[name]:
                self._arrivals[key] = n
                return
            self._arrivals.pop(key, None)
        stage = self.stages[name]
        t0 = time.perf_counter_ns()
        is_async = self.async_mode and isinstance(stage, InferStage)
        try:
            if is_async:
                stage.submit(frame)
                self._submitted[(name, frame.seq)] = t0
                if self.tracer is not None:
                    self._lane_of[(name, frame.seq)] = (self._lanes[name].take(), self.tracer.now())
                outs = stage.poll()
                while stage.over_depth():
                    outs.extend(stage.pop_oldest())
            else:
                out = stage.process(frame)
        except Exception as exc:  # noqa: BLE001 - routed through the error policy
            if is_async:
                self._submitted.pop((name, frame.seq), None)
            self.on_error(name, exc, frame)
            return
        if is_async:
            # Outside the try: a failure further down belongs to that stage's policy.
            for f in outs:
                self._done(name, f)
            return
        t1 = time.perf_counter_ns()
        self.stage_stats[name].add((t1 - t0) / 1e6)
        if self.tracer is not None:
            end = self.tracer.now()
            self.tracer.slice(self.camera, name, f"frame {frame.seq}", end - (t1 - t0), end, seq=frame.seq)
        if out is not None:
            self._emit(name, out)

    def _done(self, name: str, frame: Frame) -> None:
        t0 = self._submitted.pop((name, frame.seq), None)
        if t0 is not None:
            self.stage_stats[name].add((time.perf_counter_ns() - t0) / 1e6)
        lane = self._lane_of.pop((name, frame.seq), None)
        if lane is not None and self.tracer is not None:
            self._lanes[name].give(lane[0])
            self.tracer.slice(self.camera, f"{name} request {lane[0]}", f"frame {frame.seq}", lane[1],
                              self.tracer.now(), seq=frame.seq)
        self._emit(name, frame)


class _Camera:
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
        if opts.sync or opts.requests:
            for name, cls in graph.classes().items():
                if issubclass(cls, InferStage) and "requests" in cls.Params.model_fields:
                    overrides.setdefault(name, {})["requests"] = 1 if opts.sync else opts.requests
        self.stages = graph.instantiate(overrides)
        self.output_dir = opts.output_dir
        for st in self.stages.values():
            st.source_id = source_id
            st.output_dir = opts.output_dir  # type: ignore[attr-defined]
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
        self.live = bool(getattr(self.source, "live", False))
        if self.live:
            # A camera does not wait: packets queue generously (dropping packets breaks
            # decoding until the next keyframe), decoded frames keep only the newest.
            is_marker = getattr(self.source, "is_marker", lambda unit: unit is None)
            self.units = BoundedQueue(256, "drop_oldest", self.halt_reading,
                                      keep=lambda unit: unit is _END or is_marker(unit))
            self.frames = BoundedQueue(2, "drop_oldest", abort, keep=lambda item: item is _END)
        else:
            self.units = BoundedQueue(opts.queue_size, "block", self.halt_reading)
            self.frames = BoundedQueue(max(2, opts.queue_size // 2), "block", abort)
        if hasattr(self.source, "on_event"):
            self.source.on_event = self._on_source_event
        if hasattr(self.source, "stop_event"):
            self.source.stop_event = self.halt_reading
        self._error_seen: set[str] = set()
        self._down_since: float | None = None
        self.multi_camera = False
        self.decoder_nice = 0  # set from the thread plan: the decoder's nice value while ahead
        self.native_ids: dict[str, int] = {}  # thread role (read, decode, work, sync) -> OS thread id
        #: called on the worker thread with (source_id, frame) for every frame leaving the graph
        self.on_frame: Callable[[str, Frame], None] | None = None

    # error policy ------------------------------------------------------------------
    def on_error(self, stage_name: str, exc: BaseException, frame: Frame | None) -> bool:
        spec = self.graph.graph.nodes[stage_name]["spec"]
        policy = spec.on_error or ("skip" if ":" in spec.type else "stop")
        kind = "" if isinstance(exc, (ValueError, FileNotFoundError)) else f"{type(exc).__name__}: "
        text = f"stage {stage_name!r} on source {self.source_id!r}: {kind}{exc}"
        if policy == "skip":
            self.stats.skipped_errors += 1
            key = f"{stage_name}:{type(exc).__name__}"
            if key not in self._error_seen:  # once per stage and kind of error; the rest are counted
                self._error_seen.add(key)
                log.warning("%s (frame skipped; further %s errors of this stage are counted)", text,
                            type(exc).__name__, exc_info=exc if log.isEnabledFor(logging.DEBUG) else None)
            return True
        if policy == "restart":
            self.stats.skipped_errors += 1
            log.warning("%s (restarting the stage)", text)
            stage = self.stages[stage_name]
            stage.close()
            stage.open()
            return True
        raise StageFailure(text) from exc

    # threads -------------------------------------------------------------------------
    def open(self) -> None:
        for name, st in self.stages.items():
            try:
                st.ensure_open()
            except Exception as exc:  # noqa: BLE001
                raise StageFailure(_one_line(exc, f"stage {name!r} on source {self.source_id!r}")) from exc
            if st is self.source:
                rate = getattr(st, "frame_rate", None)
                for other in self.stages.values():
                    if hasattr(other, "source_fps"):
                        other.source_fps = rate
        self.stats.total = getattr(self.source, "total_frames", None)

    def close(self) -> None:
        for name in self.graph.order:
            try:
                self.stages[name].close()
            except Exception as exc:  # noqa: BLE001 - close everything, report the first
                log.error("closing stage %r on %r failed: %s", name, self.source_id, exc)

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
        priority = YieldWhileAhead(self.frames, self.decoder_nice)
        try:
            while True:
                try:
                    unit = self.units.get()
                except Closed:
                    break
                if unit is _END:
                    break
                for frame in self._decode(unit):
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
            self.stats.decoder_priority_changes = priority.changes
            self.halt_reading.set()
            self.frames.put_final(_END)

    def worker(self) -> None:
        self.native_ids["work"] = threading.get_native_id()
        executor = GraphExecutor(self.graph, self.stages, not self.opts.sync, self.stage_stats,
                                 self._output, self.on_error, self.opts.trace, self.source_id)
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

    def sync_loop(self) -> None:
        """Read, decode and process on one thread; one request, no overlap."""
        self.native_ids["sync"] = threading.get_native_id()
        executor = GraphExecutor(self.graph, self.stages, False, self.stage_stats, self._output, self.on_error,
                                 self.opts.trace, self.source_id)
        try:
            for unit in self.source.units():  # type: ignore[attr-defined]
                if self.stop_sources.is_set() or self.abort.is_set():
                    break
                if unit is not None:
                    self._delay()
                stop = False
                for frame in self._decode(unit):
                    if not self._take(frame):
                        stop = True
                        break
                    if self.needs_image:
                        frame.image()
                    executor.feed(frame)
                if stop:
                    break
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "worker")
        finally:
            self.stats.ended = time.monotonic()

    def _output(self, frame: Frame) -> None:
        self.stats.frame_out(frame.captured_ns, frame.seq)
        if self.on_frame is not None:
            self.on_frame(self.source_id, frame)

    def _on_source_event(self, state: str, info: dict[str, Any]) -> None:
        """A live source changed state: count it, log it, and write it to the sinks."""
        with self.stats.lock:
            self.stats.state = state
            self.stats.events[state] = self.stats.events.get(state, 0) + 1
            if state == "streaming" and self._down_since is not None:  # also when the first retry worked
                self.stats.reconnect_s.append(time.monotonic() - self._down_since)
                self._down_since = None
            elif state in ("stalled", "ended") and self._down_since is None:
                self._down_since = time.monotonic()
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
            msg = _one_line(exc, f"{where} of source {self.source_id!r}")
        if self.stats.error is None:
            self.stats.error = msg
        log.debug("failure in %s of %s", where, self.source_id, exc_info=exc)
        if where in ("source", "decoder") and self.multi_camera:
            # one camera's source failing does not stop the others; the run still reports it
            log.error("source %r stopped: %s", self.source_id, msg)
            self.halt_reading.set()
            return
        self.report_failure(msg)

    def threads(self) -> list[threading.Thread]:
        name = self.source_id
        if self.opts.sync:
            return [threading.Thread(target=self.sync_loop, name=f"{name}:sync", daemon=True)]
        return [threading.Thread(target=self.reader, name=f"{name}:read", daemon=True),
                threading.Thread(target=self.decoder, name=f"{name}:decode", daemon=True),
                threading.Thread(target=self.worker, name=f"{name}:work", daemon=True)]


def _one_line(exc: BaseException, context: str) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if isinstance(exc, (ValueError, FileNotFoundError)) else f"{context}: {type(exc).__name__}: {text}"


def source_ids(uris: list[str]) -> list[str]:
    """Short unique names for sources (file stem, scene name, host/path)."""
    out: list[str] = []
    for uri in uris:
        base = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", uri).rstrip("/").split("?")[0]  # no user:password
        stem = Path(base.split("://", 1)[-1]).stem or base.replace("://", "_")
        name, k = stem, 2
        while name in out:
            name, k = f"{stem}-{k}", k + 1
        out.append(name)
    return out


def run_pipeline(graph: PipelineGraph, sources: list[str], opts: RunOptions | None = None,
                 progress: Callable[[list[SourceStats]], None] | None = None) -> RunSummary:
    """Run ``graph`` on every source concurrently; returns the summary (never raises
    for stage failures: ``summary.error`` holds the one-line reason)."""
    from .plan_check import PlanCheck
    from .session import Session

    opts = opts or RunOptions()
    if not sources:
        raise ValueError("no source given; pass at least one --source")
    priorities = list(opts.priorities or [])
    if priorities and len(priorities) != len(sources):
        raise ValueError(f"{len(priorities)} priorities for {len(sources)} sources; give one per source")
    if not any(p.level != "normal" or p.min_fps for p in priorities):
        priorities = []  # all alike: no arbitration
    session = Session(graph, opts, expected_sources=len(sources))
    signalled = threading.Event()
    restore = install_signals(session.stop_sources, signalled) if opts.handle_signals else None
    check: PlanCheck | None = None
    try:
        try:
            session.add_sources(list(sources), priorities or None, ids=opts.source_ids, own=opts.source_overrides)
        except StageFailure as exc:
            session.failures.append(str(exc))
        else:
            if opts.on_session is not None:
                opts.on_session(session)
            check = PlanCheck(session.plan, session.cameras(), pipeline=graph.spec.name, uris=list(sources),
                              replan=opts.replan, cache=session.costs)
            while not session.wait(0.25):
                if progress is not None:
                    progress([c.stats for c in session.cameras()])
                if not opts.sync:
                    check.sample()
            if progress is not None:
                progress([c.stats for c in session.cameras()])
    finally:
        summary = session.close()
        if restore is not None:
            restore()
        if check is not None:
            check.store()
    summary.stopped_by_signal = signalled.is_set()
    summary.plan = session.plan.as_dict()
    if check is not None:
        summary.plan_check = check.result
        summary.plan_check_text = "\n".join(check.summary_lines())
    return summary


def install_signals(stop: threading.Event, signalled: threading.Event) -> Callable[[], None] | None:
    """On the main thread: SIGINT/SIGTERM set ``signalled`` and ``stop`` (a second one raises
    KeyboardInterrupt); returns a function restoring the previous handlers (None elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set():  # second signal: stop waiting politely
            raise KeyboardInterrupt
        signalled.set()
        stop.set()
        os.write(2, b"\nstopping: finishing frames in flight and closing outputs...\n")

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, h in previous.items():
            signal.signal(sig, h)

    return restore
