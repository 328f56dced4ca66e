"""The process that runs a group of cameras on one node: today's runtime inside a Ray actor.

A :class:`CameraGroup` runs :func:`pipeline.runtime.run_pipeline` on its cameras, with the
thread plan sized to the CPUs Ray reserved for it (``RunOptions.cores``) and one compiled
model per model shared by its cameras.  The driver calls :meth:`CameraGroup.run` once (it
returns when every camera has ended or the group was stopped) and :meth:`CameraGroup.status`
every poll; the actor runs methods on several threads (``max_concurrency``), so status
answers while the cameras run.

Ownership lease: each status call renews it.  A group the driver has not reached for
``lease_s`` seconds (driver gone, node cut off) stops its cameras by itself, and the driver
restarts a lost camera no sooner than ``lease_s`` after it last reached its group: a camera
is never run by two groups at once.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CameraTask", "GroupOptions", "CameraGroup", "actor_cores", "latency_dict"]

log = logging.getLogger("vapipe.cluster")


@dataclass
class CameraTask:
    """One camera of a group: its name (unique in the run), URI, placement number (0 first),
    the seq the driver last saw written plus one (where a later placement continues if its
    JSON Lines output is not reachable) and the frames it saw written before."""

    camera: str
    uri: str
    part: int = 0
    start_seq: int = 0
    frames_before: int = 0            # frames of earlier placements the driver saw


@dataclass
class GroupOptions:
    """What every group of a run shares (plain values: it travels to the actor)."""

    run_id: str
    output_dir: str = "output"
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    cpus: float = 1.0                 # Ray CPUs reserved for the group: its thread budget
    max_frames: int | None = None     # frames per camera over all its placements
    requests: int | None = None
    lease_s: float = 4.0
    #: seconds from the actor's start before its cameras may start (the lease of their lost owner
    #: running out); the process starts and loads the pipeline meanwhile
    start_after_s: float = 0.0


def actor_cores(cpus: float) -> int:
    """The thread budget (``RunOptions.cores``) of a group holding ``cpus`` Ray CPUs: at least 1."""
    return max(1, math.floor(cpus + 0.5))


class CameraGroup:
    """Runs ``tasks`` of pipeline ``spec`` (a :class:`pipeline.config.PipelineSpec` as a dict)."""

    def __init__(self, spec: dict[str, Any], config_path: str, tasks: list[dict[str, Any]],
                 options: dict[str, Any]) -> None:
        self._lease = self._created = time.monotonic()
        #: wall-clock seconds (time.time()) of the actor's start-up steps, for the driver's summary
        self.timings: dict[str, float] = {"process": _process_started(), "init": time.time()}
        self.spec = spec
        self.config_path = config_path
        self.tasks = [CameraTask(**t) for t in tasks]
        self.options = GroupOptions(**options)
        self.stop_event = threading.Event()
        self._stats: list[Any] = []
        self._starts: dict[str, int] = {t.camera: t.start_seq for t in self.tasks}
        self._exact: dict[str, bool] = {}
        self._before: dict[str, int] = {t.camera: t.frames_before for t in self.tasks}
        self._lost: dict[str, int | None] = {}  # per camera: video frames its lost placement did not write
        self._state = "starting"
        self._ended = threading.Event()
        self._error: str | None = None
        self._lock = threading.Lock()
        self._session: Any = None                 # the running pipeline.session.Session
        self._session_ready = threading.Event()
        self._starting = False                    # the cameras are being opened (or run)
        self._removed: set[str] = set()           # cameras the driver took out of the group
        self.node_id = _node_id()
        threading.Thread(target=self._watch_lease, name="lease", daemon=True).start()

    # driver calls ----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run the cameras until they end or :meth:`stop`; returns the run's summary (as a dict),
        the seq each camera started at and whether that came from its own output."""
        from pipeline.config import PipelineSpec
        from pipeline.graph import build_graph
        from pipeline.runtime import RunOptions, run_pipeline

        opts = self.options
        self.timings["run"] = time.time()
        try:
            graph = build_graph(PipelineSpec.model_validate(self.spec), self.config_path)
            self.timings["imported"] = time.time()
            # the earlier owner may write until its lease ends: read where to continue after that
            if self.stop_event.wait(max(0.0, self._created + opts.start_after_s - time.monotonic())):
                raise RuntimeError("stopped before its cameras started")
            self.timings["started"] = time.time()
            with self._lock:
                tasks = [t for t in self.tasks if t.camera not in self._removed]
                self._starting = True
            if not tasks:  # every camera was removed before it started
                self._ended.set()
                self._state = "ended"
                return {"node": self.node_id, "state": self._state, "error": None, "summary": None,
                        "starts": self._starts, "exact": self._exact, "status": self._snapshot()}
            own = [self._prepare(graph, t) for t in tasks]
            left = None
            if opts.max_frames is not None:  # resumed cameras with a frame limit come one per group
                left = max(0, min(opts.max_frames - self._before[t.camera] for t in tasks))
            run_opts = RunOptions(output_dir=Path(opts.output_dir), overrides=opts.overrides,
                                  max_frames=left, requests=opts.requests,
                                  cores=actor_cores(opts.cpus), handle_signals=False, stop_event=self.stop_event,
                                  source_ids=[t.camera for t in tasks], source_overrides=own,
                                  on_session=self._attach)
            self._state = "running"
            summary = run_pipeline(graph, [t.uri for t in tasks], run_opts, progress=self._progress)
        except Exception as exc:  # noqa: BLE001 - reported to the driver as one line
            self._ended.set()
            if self._state != "lease_expired":
                self._state = "failed"
            self._error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
            return {"node": self.node_id, "state": self._state, "error": self._error, "summary": None,
                    "starts": self._starts, "exact": self._exact}
        self._ended.set()
        if self._state != "lease_expired":
            self._state = "ended"
        with self._lock:
            self._stats = [s for s in summary.sources if s.source not in self._removed]
        return {"node": self.node_id, "state": self._state, "error": summary.error, "summary": summary.as_dict(),
                "starts": self._starts, "exact": self._exact, "status": self._snapshot()}

    def status(self) -> dict[str, Any]:
        """Renews the lease; the group's state and, per camera, frames, fps, drops, last seq, events,
        source state, latency histogram, queue depths and requests in flight; per stage, its latency
        histogram (see :func:`latency_dict`)."""
        self._lease = time.monotonic()
        return self._snapshot()

    def stop(self) -> None:
        """Finish the frames in flight, close every output and return from :meth:`run`."""
        self.stop_event.set()

    def remove(self, camera: str) -> dict[str, Any]:
        """Take ``camera`` out of the group: its frames in flight finish and its outputs close while the
        group's other cameras go on (a camera not started yet never starts).  Returns its frames, last
        seq and drops.  KeyError: not a running camera of the group."""
        with self._lock:
            if camera not in {t.camera for t in self.tasks} or camera in self._removed:
                raise KeyError(camera)
            if not self._starting:
                self._removed.add(camera)
                return {"frames": 0, "last_seq": None, "dropped": 0}
        while not (self._session_ready.is_set() or self._ended.is_set()):
            self._ended.wait(0.05)
        with self._lock:
            stats = next((s for s in self._stats if s.source == camera), None)
            session = None if self._ended.is_set() else self._session
            self._removed.add(camera)
        if session is not None:
            stats = session.remove_source(camera)
        with self._lock:
            self._stats = [s for s in self._stats if s.source != camera]
        if stats is None:
            return {"frames": 0, "last_seq": None, "dropped": 0}
        with stats.lock:
            return {"frames": stats.processed, "last_seq": stats.last_seq, "dropped": stats.dropped}

    # internals -------------------------------------------------------------------------
    def _prepare(self, graph: Any, task: CameraTask) -> dict[str, dict[str, Any]]:
        """This camera's own overrides: where it starts, JSON Lines appended, its video segment."""
        from .resume import prepare_jsonl, segment_template, sink_paths, stage_param

        opts = self.options
        out = Path(opts.output_dir)
        start, exact = task.start_seq, False
        jsonl = sink_paths(graph, opts.overrides, out, task.camera, "jsonl")
        for i, path in enumerate(jsonl.values()):
            resume = prepare_jsonl(path, task.camera, opts.run_id, task.part, task.start_seq, self.node_id)
            if i == 0:  # the first JSON Lines sink decides where the camera continues
                start, exact = resume.start, resume.exact
                if resume.frames is not None:
                    self._before[task.camera] = resume.frames
                if resume.previous is not None and resume.previous_frames is not None:
                    self._lost[task.camera] = self._video_lost(graph, task.camera, resume.previous,
                                                               resume.previous_frames)
        self._starts[task.camera] = start
        self._exact[task.camera] = exact
        own: dict[str, dict[str, Any]] = {name: {"append": True} for name in jsonl}
        if start:
            own[graph.source] = {"start_frame": start}
        if task.part > 0:
            for name in sink_paths(graph, opts.overrides, out, task.camera, "video"):
                own[name] = {"path": segment_template(str(stage_param(graph, opts.overrides, name, "path")), start)}
        return own

    def _video_lost(self, graph: Any, camera: str, previous: dict[str, Any], written: int) -> int | None:
        """Frames the previous placement wrote to its JSON Lines (``written``) but not to its video
        segment (in flight in the encoder when its node died); None without a video sink or a
        readable segment.  A segment its node died writing is first cut back to its last whole
        fragment, so that it plays to its end."""
        from .resume import seal_fragmented_mp4, segment_template, sink_paths, stage_param, video_frames

        opts = self.options
        first = int(previous.get("start_seq") or 0)
        overrides = {k: dict(v) for k, v in opts.overrides.items()}
        for name in sink_paths(graph, overrides, Path(opts.output_dir), camera, "video"):
            if int(previous.get("part") or 0) > 0:  # the previous placement wrote a segment of its own
                template = segment_template(str(stage_param(graph, overrides, name, "path")), first)
                overrides.setdefault(name, {})["path"] = template
        paths = list(sink_paths(graph, overrides, Path(opts.output_dir), camera, "video").values())
        for path in paths:
            seal_fragmented_mp4(path)
        for path in paths:
            frames = video_frames(path)
            if frames is not None:
                return max(0, written - frames)
        return None

    def _attach(self, session: Any) -> None:
        with self._lock:
            self._session = session
        self._session_ready.set()

    def _snapshot(self) -> dict[str, Any]:
        with self._lock:
            stats = [s for s in self._stats if s.source not in self._removed]
            session = self._session
        live: dict[str, Any] = {}
        stages: dict[str, dict[str, Any]] = {}
        publishers: list[dict[str, int]] = []
        if session is not None:
            from service.backend import session_publishers

            live = {s["id"]: s for s in session.sources()}
            stages = {name: latency_dict(lat) for name, lat in session.stage_stats.items()}
            publishers = session_publishers(session)
        cameras = {}
        for s in stats:
            with s.lock:
                cam = {"frames": s.processed, "fps": round(s.fps, 2), "dropped": s.dropped, "last_seq": s.last_seq,
                       "events": dict(s.events), "error": s.error, "ended": s.ended is not None,
                       "decode_errors": s.decode_errors, "state": s.state or "connecting",
                       "latency": latency_dict(s.latency), "queue_packets": 0, "queue_frames": 0, "in_flight": {}}
            info = live.get(s.source)
            if info is not None:  # counted live (queued drops too) while the camera runs
                cam.update({k: info[k] for k in ("dropped", "decode_errors", "state", "queue_packets",
                                                 "queue_frames")}, in_flight=dict(info["in_flight"]))
            cameras[s.source] = cam
        return {"node": self.node_id, "pid": os.getpid(), "state": self._state, "error": self._error,
                "cameras": cameras, "stages": stages, "publishers": publishers, "starts": dict(self._starts),
                "exact": dict(self._exact), "before": dict(self._before), "timings": dict(self.timings),
                "lost": dict(self._lost)}

    def _progress(self, stats: list[Any]) -> None:
        with self._lock:
            self._stats = [s for s in stats if s.source not in self._removed]
            if "first_frame" not in self.timings and any(s.processed for s in stats):
                self.timings["first_frame"] = time.time()

    def _watch_lease(self) -> None:
        while not self.stop_event.wait(0.25) and not self._ended.is_set():
            if time.monotonic() - self._lease > self.options.lease_s:
                log.warning("cluster driver not heard from for %.1f s: stopping cameras %s", self.options.lease_s,
                            ", ".join(t.camera for t in self.tasks))
                self._state = "lease_expired"
                self.stop_event.set()


def _process_started() -> float:
    """Wall-clock start of this process (Linux: from /proc), or now."""
    try:
        with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def _node_id() -> str:
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():  # outside Ray (the class used on its own): never connect
        return ""
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        return ""


def task_dicts(tasks: list[CameraTask]) -> list[dict[str, Any]]:
    return [asdict(t) for t in tasks]


def latency_dict(lat: Any) -> dict[str, Any]:
    """A :class:`pipeline.stats.LatencyStats` histogram as plain values: ``buckets`` (counts per bound of
    ``LATENCY_BUCKETS_MS``, then above), ``count`` and ``total_ms``."""
    return {"buckets": list(lat.buckets), "count": int(lat.count), "total_ms": float(lat.total_ms)}
