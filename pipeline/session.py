"""A long-lived run of one graph whose set of sources changes while it runs.

:class:`Session` owns what :func:`pipeline.runtime.run_pipeline` used to hold on
its stack: the cameras (three threads each, see :mod:`pipeline.runtime`), the
per-stage latency statistics, the thread plan and the stop/abort events.
Sources can be added and removed at any time; the others keep running.
``run_pipeline`` is a thin wrapper: start with the given sources, wait, close.

Thread plan on a change of sources: the plan is computed again for the new
number of sources (``plan_for_graph``).  A camera added while others run takes
its decoder threads and decoder priority from the new plan, and the process-wide
settings (OpenCV, BLAS) are re-applied from it; when the new plan changes an
inference stage's streams, threads or requests, the running cameras' stages take
them before their next frame (a compiled model's streams cannot change while
requests run on it, so the stage compiles the model again and the frames in
flight finish on the old one, in order).  :attr:`Session.plan` is the current plan
and :attr:`Session.plan_note` says which stages running cameras re-planned.

Removing a source stops only that camera: its reader halts, frames in flight
finish, its stages close (MP4 finalised, JSON Lines flushed) and its statistics
stay in the summary.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import replace
from functools import partial
from typing import Any, Callable

from .arbiter import SourcePriority
from .frame import Frame
from .graph import PipelineGraph
from .left_readers import Stopped, run_unless_stopped
from .priority import NiceGroup
from .camera import Camera
from .camera_lifecycle import join_camera, open_camera, running_thread
from .outputs import RunFiles, check_distinct_outputs, make_output_dir
from .run_options import RunOptions
from .session_plan import SessionPlanning
from .source_info import SourceInfo, source_info
from .source_names import source_ids
from .stats import LatencyStats, RunSummary, SourceStats

__all__ = ["Session", "SourceInfo"]

log = logging.getLogger("vapipe")


class Session(SessionPlanning):
    """Runs ``graph`` on a changing set of sources in this process.

    ``expected_sources`` sizes the first thread plan (``run_pipeline`` passes the
    number of sources it starts with).  ``process_wide=False`` leaves the GIL switch
    interval and the process-wide thread settings alone (the caller manages them,
    e.g. a server running several sessions).  ``on_frame(source_id, frame)`` is
    called on the camera's worker thread for every frame that leaves the graph; it
    must return at once.  ``thread_prefix`` starts the names of the cameras' threads
    (a server tells its instances' log lines apart by it).
    """

    def __init__(self, graph: PipelineGraph, opts: RunOptions | None = None, *, expected_sources: int = 1,
                 process_wide: bool = True, on_frame: Callable[[str, Frame], None] | None = None,
                 thread_prefix: str = "") -> None:
        self.graph = graph
        self.thread_prefix = thread_prefix
        self.opts = opts or RunOptions()
        self.process_wide = process_wide
        self.on_frame = on_frame
        self.stage_stats = {n: LatencyStats() for n in graph.order if n != graph.source}
        self.started = time.monotonic()
        self.stop_sources = self.opts.stop_event if self.opts.stop_event is not None else threading.Event()
        self.failures: list[str] = []
        self._aborted = threading.Event()
        self._lock = threading.RLock()
        self._cameras: dict[str, Camera] = {}         # running or finished, not removed
        self._removed: list[Camera] = []
        self._removing: dict[str, Camera] = {}        # removed, frames in flight not yet finished
        self._threads: dict[str, list[threading.Thread]] = {}
        self._closed_ids: set[str] = set()
        self._finished: set[int] = set()               # id() of cameras closed by _finish
        self._stop_at: float | None = None
        self._restore: list[Callable[[], None]] = []
        #: the decoders of each priority level ("" without priorities), from the first camera's plan
        self._decoders: dict[str, NiceGroup] = {}
        self._run_files = RunFiles()
        from .costs import CostCache

        #: measured costs the plan comes from (none with cores=0: every runtime keeps its defaults)
        self.costs = CostCache() if self.opts.cores != 0 else None
        self.plan = self._plan(max(1, expected_sources), measure=False)  # measured once the sources are known
        self._overrides = self._plan_overrides(self.plan)
        self.plan_note = ""
        self._made_output_dir = make_output_dir(self.opts.output_dir)
        if process_wide:
            from .threads import apply_global

            old_interval = sys.getswitchinterval()
            if self.opts.switch_interval_s:
                sys.setswitchinterval(self.opts.switch_interval_s)
            self._restore.append(lambda: sys.setswitchinterval(old_interval))
            self._restore_global = apply_global(self.plan, ort_pool=False)  # ORT's pool: once measured

    # sources ---------------------------------------------------------------------------
    def add_sources(self, uris: list[str], priorities: list[SourcePriority] | None = None,
                    ids: list[str] | None = None, own: list[dict[str, dict[str, Any]]] | None = None) -> list[str]:
        """Open every source first, then start them together; any failure to open raises
        (:class:`StageFailure` or the source's one-line error) and starts none, and so does a
        stop while they open (:class:`~pipeline.left_readers.Stopped`, at once).  ``priorities``:
        one per source, on the models the cameras share (:mod:`pipeline.arbiter`); ``ids``: their
        names (default: from the URIs); ``own``: per source, stage overrides for that camera only."""
        with self._lock:
            self._check_open()
            taken = set(self._cameras) | set(self._removing) | self._closed_ids
            if ids is not None and (len(ids) != len(uris) or len(set(ids)) != len(ids)):
                raise ValueError(f"{len(uris)} sources need as many distinct source ids, got {list(ids)}")
            if ids is not None and set(ids) & taken:
                raise ValueError(f"source id(s) already in use: {sorted(set(ids) & taken)}")
            if own is not None and len(own) != len(uris):
                raise ValueError(f"{len(own)} per-source overrides for {len(uris)} sources")
            ids = list(ids) if ids is not None else source_ids(uris, taken)
            try:
                opts = replace(self.opts, overrides=self._revise_plan(uris))
            except Stopped:
                raise Stopped("the run was stopped while its sources opened") from None
            cams = [self._camera(uri, sid, opts, priorities[i] if priorities else None, own[i] if own else None)
                    for i, (uri, sid) in enumerate(zip(uris, ids))]
            check_distinct_outputs([*(self._cameras[sid] for sid in self._live_ids()), *self._removing.values(),
                                    *cams])
            opened: list[Camera] = []
            try:
                for cam in cams:
                    # on a helper thread: a stop (Ctrl-C) returns at once from an open that
                    # waits for a stream's open timeout; that camera closes when its open ends
                    run_unless_stopped(partial(open_camera, cam), self._stopping, Camera.close)
                    opened.append(cam)
            except BaseException as exc:
                for cam in opened:
                    cam.close()
                self._removed.extend(cams)  # in the summary with what they counted
                if not isinstance(exc, Stopped):  # (a stop ends the run: no plan to mend)
                    self._plan_without_failed()
                if isinstance(exc, Stopped):
                    cams[len(opened)].halt_reading.set()  # its open goes on: no further stage of it opens
                    raise Stopped("the run was stopped while its sources opened") from None
                raise
            for cam in cams:
                self._cameras[cam.source_id] = cam
            self._mark_multi_camera()
            for cam in cams:
                threads = cam.threads(self.thread_prefix)
                self._threads[cam.source_id] = threads
                for t in threads:
                    t.start()
            return ids

    def add_source(self, uri: str, source_id: str | None = None) -> str:
        """Start one more camera; returns its source id (``source_id`` if given and free)."""
        return self.add_sources([uri], ids=None if source_id is None else [source_id])[0]

    def remove_source(self, source_id: str, timeout: float | None = None) -> SourceStats:
        """Stop one camera (frames in flight finish, its outputs are finalised); returns its
        statistics.  Raises KeyError for an unknown id.  Until it returns, the camera's id and
        output files stay its own: a source added meanwhile gets another id."""
        with self._lock:
            cam = self._cameras.pop(source_id, None)
            if cam is None:
                raise KeyError(source_id)
            self._removed.append(cam)
            self._removing[source_id] = cam
        cam.halt_reading.set()
        deadline = time.monotonic() + (self.opts.stop_deadline_s if timeout is None else timeout)
        threads = self._threads.pop(source_id, [])
        if not join_camera(cam, threads, deadline):
            cam.abort.set()  # frames still in flight past the deadline: stop waiting for them
            join_camera(cam, threads, time.monotonic() + self.opts.stop_deadline_s)
        self._finish(cam)
        with self._lock:
            del self._removing[source_id]  # its outputs are closed
        self._mark_multi_camera(keep=True)
        return cam.stats

    def _mark_multi_camera(self, keep: bool = False) -> None:
        """Tell the cameras whether others run beside them (``keep``: once set, it stays set)."""
        with self._lock:
            multi = len(self._cameras) > 1
            for cam in self._cameras.values():
                cam.multi_camera = multi or (keep and cam.multi_camera)

    def _stopping(self) -> bool:
        return self._aborted.is_set() or self.stop_sources.is_set()

    def _check_open(self) -> None:
        if self._stopping():
            raise RuntimeError("the run is stopping; no source can be added")

    def _camera(self, uri: str, source_id: str, opts: RunOptions, priority: SourcePriority | None = None,
                own: dict[str, dict[str, Any]] | None = None) -> Camera:
        abort = threading.Event()  # per camera: remove_source may force one camera to stop
        cam = Camera(self.graph, uri, source_id, opts, self.stop_sources, abort, self.stage_stats,
                      self._report_failure, priority, own)
        # every decoder of a priority level goes up and down together: one left at normal priority
        # among lowered ones would take the CPU they leave, and its camera outrun the others.  A more
        # urgent camera's decoder is not lowered for the full queues of the cameras it goes before
        # (under overload theirs are always full, as they drop frames: it would run at nice 10 then)
        for st in cam.stages.values():
            st.run_files = self._run_files  # type: ignore[attr-defined]  # shared files: started once a run
        level = priority.level if priority is not None else ""
        if level not in self._decoders:
            self._decoders[level] = NiceGroup(self.plan.decoder_nice)
        cam.decoder_group = self._decoders[level]
        cam.on_frame = self.on_frame
        return cam

    def _report_failure(self, msg: str) -> None:
        with self._lock:
            self.failures.append(msg)
        self.abort()

    # control ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Like SIGTERM: stop reading, finish the frames in flight, then end (see :meth:`wait`)."""
        self.stop_sources.set()

    def abort(self) -> None:
        """Stop at once (frames in flight are abandoned; outputs are still closed)."""
        self._aborted.set()
        with self._lock:
            cams = list(self._cameras.values())
        for cam in cams:
            cam.halt_reading.set()
            cam.abort.set()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def _running_thread(self, source_id: str) -> threading.Thread | None:
        """A thread of the camera that still runs (its reader ends first for a file), or None."""
        return running_thread(self._cameras.get(source_id), self._threads.get(source_id, []))

    def _alive(self, source_id: str) -> bool:
        return self._running_thread(source_id) is not None

    def _live_ids(self) -> list[str]:
        return [sid for sid in self._cameras if self._alive(sid)]

    @property
    def running(self) -> bool:
        """True while any camera's threads run."""
        with self._lock:
            return bool(self._live_ids())

    def wait(self, timeout: float = 0.25) -> bool:
        """Supervise for up to ``timeout`` seconds; True once no camera runs any more (a session
        whose cameras were all removed stays open until a camera joins or :meth:`stop`).

        Enforces the stop deadline (``opts.stop_deadline_s`` after :meth:`stop`) and halts
        every reader on abort.  Cameras that ended are finalised here.
        """
        end = time.monotonic() + timeout
        while True:
            with self._lock:
                cams = list(self._cameras.values())
                running = [(c, t) for c in cams if (t := self._running_thread(c.source_id)) is not None]
            live = [c for c, _ in running]
            if self._aborted.is_set() or self.stop_sources.is_set():
                for c in cams:
                    c.halt_reading.set()
                if self.stop_sources.is_set() and self._stop_at is None:
                    self._stop_at = time.monotonic() + self.opts.stop_deadline_s
                if self._stop_at is not None and time.monotonic() > self._stop_at:
                    self.abort()
            for c in cams:
                if c not in live:
                    self._finish(c)
            # Done when the cameras ended; a session whose cameras were all removed waits for the next
            # one (or for stop) instead.
            if not live and (cams or self.stop_sources.is_set() or self._aborted.is_set()):
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            # Block on a thread that still ran just now (joining an ended one returns at once).
            if running:
                running[0][1].join(timeout=min(left, 0.05))
            else:
                time.sleep(min(left, 0.05))

    def _finish(self, cam: Camera) -> None:
        """Close a camera whose threads ended (once): stages closed, counters final.  Its queues'
        drops join ``stats.dropped`` as it counts as finished, so its total never goes down."""
        with self._lock:
            if id(cam) in self._finished:
                return
            self._finished.add(id(cam))
            self._closed_ids.add(cam.source_id)
            cam.stats.dropped += cam.units.dropped + cam.frames.dropped
            cam.stats.drop_times = sorted([*cam.units.drop_times, *cam.frames.drop_times])
        cam.close()
        cam.collect_counters()
        cam.stats.decode_errors = getattr(cam.source, "decode_errors", 0)
        if cam.priority is not None:
            p = cam.priority
            cam.stats.priority = {"level": p.level, "min_fps": p.min_fps, "waits": p.waits, "promoted": p.promoted}

    def close(self) -> RunSummary:
        """End everything now (aborting what still runs), close every output and restore
        the process-wide settings; returns the summary.  Safe to call more than once."""
        with self._lock:
            cams = list(self._cameras.values())
            threads = {c.source_id: list(self._threads.get(c.source_id, [])) for c in cams}
        for c in cams:
            c.halt_reading.set()
        self.abort()  # nothing may block from here on
        for c in cams:
            join_camera(c, threads[c.source_id], time.monotonic() + self.opts.stop_deadline_s)
        for c in cams:
            self._finish(c)
        restore, self._restore = self._restore, []
        if restore:
            for fn in restore:
                fn()
            self._restore_global()
        out = self.opts.output_dir
        if self._made_output_dir and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a run that wrote nothing (it failed at the start) leaves no empty directory
        return self.summary()

    # statistics ------------------------------------------------------------------------
    def freeze_latencies(self) -> None:
        """Drop the latency samples and the cost cache of a closed session, keeping the latency
        summaries and histograms (a server keeps finished instances for their records)."""
        with self._lock:
            self.costs = None  # the costs file's entries (~100 KB); plans are made only while running
            cams = list(self._cameras.values()) + self._removed
        for stats in [*self.stage_stats.values(), *(c.stats.latency for c in cams)]:
            stats.freeze()

    def cameras(self) -> list[Camera]:
        with self._lock:
            return list(self._cameras.values())

    def removed_cameras(self) -> list[Camera]:
        """The cameras :meth:`remove_source` took out, in the order it did."""
        with self._lock:
            return list(self._removed)

    def sources(self) -> list[SourceInfo]:
        """Per source (removed ones excluded): id, uri, state, counters read live."""
        with self._lock:
            return [source_info(cam, self._alive(cam.source_id), id(cam) in self._finished)
                    for cam in self._cameras.values()]

    def summary(self) -> RunSummary:
        with self._lock:
            cams = list(self._cameras.values()) + self._removed
        cams.sort(key=lambda c: c.stats.started)
        error = (self.failures or [c.stats.error for c in cams if c.stats.error] or [None])[0]
        outputs: list[str] = []
        for c in cams:
            for st in c.stages.values():
                path = getattr(st, "path", None) if st.kind == "sink" else None
                if path is not None:
                    outputs.append(str(path))
        threads = self.plan.summary() + (f" ({self.plan_note})" if self.plan_note else "")
        return RunSummary(pipeline=self.graph.spec.name, mode="sync" if self.opts.sync else "async",
                          sources=[c.stats for c in cams], stages=self.stage_stats,
                          wall_s=time.monotonic() - self.started, error=error, outputs=outputs, threads=threads)

