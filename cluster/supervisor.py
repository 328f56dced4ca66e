"""The driver side of a cluster run: place cameras on Ray actors, watch them, move the lost ones.

:class:`ClusterRun` spreads the cameras of one pipeline evenly over the nodes with room
(:mod:`cluster.placement`), one actor (:class:`cluster.actor.CameraGroup`) per node and group of
cameras, each reserving ``cpus_per_camera`` Ray CPUs per camera (its thread budget).  Every
``poll_s`` it asks Ray which nodes are alive, collects the actors that ended or died and asks the
others for their status (which renews their ownership lease); an actor's record and what its
reports do to its cameras' records are :mod:`cluster.groups`.

A node that dies (Ray marks it dead once its raylet misses its health checks) or an actor that
dies: its cameras are *lost*; once their lease has run out they are placed again on the nodes
with room, continuing after the last frame written (files) or from the live stream, and wait as
*pending* (counted) where no node has room, until one has.  Cameras elsewhere are not touched.
The head node is not watched: losing it ends the cluster (and this run).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .actor import GroupOptions, actor_cores
from .groups import ActorGroup, launch_group
from .placement import NodeInfo, spread
from .records import CameraRecord, ClusterSummary, metrics

__all__ = ["ClusterOptions", "ClusterRun"]

log = logging.getLogger("vapipe.cluster")

#: the runs of this process: each places its cameras in the CPUs the others left
_RUNS: "weakref.WeakSet[ClusterRun]" = weakref.WeakSet()
#: polls of frame counts kept in ``ClusterRun.history`` (2 minutes at the default poll)
HISTORY = 240


@dataclass
class ClusterOptions:
    """How a pipeline runs on the cluster (defaults suit ``vapipe run --cluster``)."""

    output_dir: Path = Path("output")     # on every node: each writes the files of its cameras there
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    cpus_per_camera: float = 1.0          # Ray CPUs reserved per camera (see cluster.capacity)
    max_frames: int | None = None         # per camera, over all its placements
    requests: int | None = None
    poll_s: float = 0.5
    lease_s: float = 4.0                  # an actor not reached this long stops; lost cameras wait this long
    #: cameras per actor at most (an actor is one process: its Python work shares one GIL); a node's
    #: cameras placed together fill as few actors as this allows
    group_size: int | None = 32
    stop_timeout_s: float = 30.0
    max_concurrency: int = 4              # actor threads: run, status and stop calls at once


class ClusterRun:
    """One pipeline on many cameras over a Ray cluster this process is connected to
    (:func:`cluster.connect.connect`).  ``names`` are the cameras' names (default: from the URIs)."""

    def __init__(self, spec: Any, sources: list[str], options: ClusterOptions | None = None,
                 config_path: str = "<string>", names: list[str] | None = None) -> None:
        from pipeline.graph import build_graph
        from pipeline.runtime import source_ids
        from stages.sources import is_live_uri

        from .resume import cluster_overrides

        if not sources:
            raise ValueError("no source given; pass at least one --source")
        self.options = options or ClusterOptions()
        if self.options.cpus_per_camera <= 0:
            raise ValueError(f"cpus per camera must be > 0, got {self.options.cpus_per_camera}")
        self.spec = spec
        self.config_path = config_path
        self.graph = build_graph(spec, config_path)
        self.overrides = cluster_overrides(self.graph, self.options.overrides)
        names = list(names) if names is not None else source_ids(sources)
        if len(names) != len(sources) or len(set(names)) != len(names):
            raise ValueError(f"{len(sources)} sources need as many distinct names")
        user_start = int(self.overrides.get(self.graph.source, {}).get(
            "start_frame", self.graph.graph.nodes[self.graph.source]["spec"].params.get("start_frame", 0)) or 0)
        self._start_seq = user_start
        self.cameras = {n: CameraRecord(n, u, is_live_uri(u), start_seq=user_start) for n, u in zip(names, sources)}
        #: cameras taken out while the run goes (remove_camera): stopped, never placed again
        self.removed: set[str] = set()
        self.run_id = uuid.uuid4().hex[:12]
        self.groups: dict[str, ActorGroup] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.nodes_lost: list[dict[str, Any]] = []
        #: (time, camera -> frames) of the latest polls
        self.history: deque[tuple[float, dict[str, int]]] = deque(maxlen=HISTORY)
        self.started = time.monotonic()
        self.stop_requested = threading.Event()
        self._serial = 0
        self._placed_once = False
        self._closed = False                  # run() returned: its actors are released
        self._lock = threading.RLock()
        _RUNS.add(self)

    # public API ----------------------------------------------------------------------------
    def start(self) -> None:
        """Place every camera (those without room stay pending); once."""
        with self._lock:
            if self._placed_once:
                return
            self._placed_once = True
            self.started = time.monotonic()
            self._refresh_nodes()
            self._place([c for c in self.cameras.values() if c.state == "pending"])

    def poll(self) -> None:
        """One supervision step: node deaths, ended or dead actors, statuses, moves of lost cameras."""
        with self._lock:
            self._refresh_nodes()
            self._collect_ended()
            self._collect_status()
            if not self.stop_requested.is_set():
                self._replace_lost()
            self.history.append((time.monotonic(), {c.name: c.frames for c in self.cameras.values()}))

    def run(self, progress: Callable[["ClusterRun"], None] | None = None) -> ClusterSummary:
        """Start (unless :meth:`start` was called), supervise until every camera has ended (or
        :meth:`stop`), release the actors and return the summary."""
        self.start()
        stop_at: float | None = None
        while not self.finished:
            time.sleep(self.options.poll_s)
            self.poll()
            if progress is not None:
                progress(self)
            if self.stop_requested.is_set():
                stop_at = stop_at or time.monotonic() + self.options.stop_timeout_s
                if time.monotonic() > stop_at:
                    break
        with self._lock:
            self._closed = True
            self._abandon()
        return self.summary()

    def stop(self) -> None:
        """Ask every actor to finish its frames in flight and close its outputs; pending and lost
        cameras are not placed any more."""
        self.stop_requested.set()
        with self._lock:
            for cam in self.cameras.values():
                if cam.state in ("pending", "lost"):
                    cam.state = "stopped"
            for g in self.groups.values():
                if not g.gone:
                    try:
                        g.actor.stop.remote()
                    except Exception:  # noqa: BLE001 - a dead actor has nothing to stop
                        pass

    def add_camera(self, uri: str, name: str | None = None) -> str:
        """One more camera while the run goes: once the run has started it is placed at once, in an actor
        of its own on the node with the fewest cameras (pending while no node has room).  Returns its
        name (``name``, or one made from the URI as for the first cameras, unique in the run).
        RuntimeError once the run stops; ValueError for a name in use."""
        from stages.sources import is_live_uri

        with self._lock:
            if self.stop_requested.is_set() or self._closed:
                raise RuntimeError("the run is stopping; no camera can be added")
            if name is None:
                name = self.camera_name(uri)
            elif name in self.cameras:
                raise ValueError(f"camera name {name!r} is already in use")
            cam = CameraRecord(name, uri, is_live_uri(uri), start_seq=self._start_seq)
            self.cameras[name] = cam
            if self._placed_once:
                self._place([cam])
            log.info("camera %s added (%s)", name, cam.state)
            return name

    def camera_name(self, uri: str) -> str:
        """The name :meth:`add_camera` gives a camera of ``uri`` now: from the URI, distinct from every
        camera the run has had."""
        from pipeline.runtime import source_ids

        with self._lock:
            return source_ids([uri], taken=self.cameras)[0]

    def remove_camera(self, name: str, timeout: float | None = None) -> None:
        """Stop camera ``name`` while the others go on: its frames in flight finish and its outputs are
        closed before this returns (within ``timeout``, default ``stop_timeout_s``); it is never placed
        again.  Cameras sharing its actor keep running; an actor left without cameras ends.  KeyError:
        no such camera, or removed already."""
        import ray

        with self._lock:
            cam = self.cameras.get(name)
            if cam is None or name in self.removed:
                raise KeyError(name)
            self.removed.add(name)
            g = self.groups.get(cam.group or "")
            if g is None or g.gone or cam.state not in ("starting", "running"):
                if cam.state not in ("done", "failed"):
                    cam.state, cam.fps = "stopped", 0.0
                return
            others = [n for n in g.cameras if n != name and self.cameras[n].state in ("starting", "running")]
            if others:  # the actor stops this camera alone
                g.cameras.remove(name)
                ref, whole = g.actor.remove.remote(name), False
            else:       # its last camera: the actor ends
                g.actor.stop.remote()
                ref, whole = g.ref, True
        try:  # outside the lock: polls go on (and renew the other actors' leases) meanwhile
            result = ray.get(ref, timeout=self.options.stop_timeout_s if timeout is None else timeout)
        except Exception as exc:  # noqa: BLE001 - its actor died or did not answer in time
            log.warning("camera %s: removing it from its actor failed (%s)", name, type(exc).__name__)
            result = None
        with self._lock:
            if whole:
                if result is not None:  # else the next poll finds out what became of the actor
                    g.end(result, self.cameras, self.stop_requested, self.removed)
                return
            if result is not None:
                cam.frames_now = max(cam.frames_now, int(result["frames"]))
                cam.last_seq = result["last_seq"] if result["last_seq"] is not None else cam.last_seq
                cam.dropped = max(cam.dropped, int(result["dropped"]))
            cam.close_placement()
            cam.state, cam.fps = "stopped", 0.0

    def group_statuses(self) -> list[dict[str, Any]]:
        """Per actor of the run (ended and lost ones too): its node, its cameras, whether it is gone, and
        the last status it reported (:meth:`cluster.actor.CameraGroup.status`; None before the first)."""
        with self._lock:
            return [{"group": g.key, "node": g.node, "cameras": list(g.cameras), "gone": g.gone, "status": g.status}
                    for g in self.groups.values()]

    @property
    def finished(self) -> bool:
        """Every camera has ended; a run whose cameras were all removed goes on until a camera is
        added or :meth:`stop`."""
        if not all(c.state in ("done", "failed", "stopped") for c in self.cameras.values()):
            return False
        return self.stop_requested.is_set() or any(n not in self.removed for n in self.cameras)

    def snapshot(self) -> dict[str, Any]:
        """The run now: cameras (state, node, frames, fps, last seq, losses) and nodes with their cameras."""
        with self._lock:
            per_node: dict[str, list[str]] = {}
            for c in self.cameras.values():
                if c.node and c.state in ("starting", "running"):
                    per_node.setdefault(c.node, []).append(c.name)
            return {"run": self.run_id, "pipeline": self.spec.name,
                    "elapsed_s": round(time.monotonic() - self.started, 3),
                    "cameras": {c.name: {**c.as_dict(), "removed": c.name in self.removed}
                                for c in self.cameras.values()},
                    "nodes": {nid: {"address": n.address, "cpus": n.cpus, "cameras": sorted(per_node.get(nid, []))}
                              for nid, n in self.nodes.items()},
                    "nodes_lost": list(self.nodes_lost)}

    def metrics(self) -> dict[str, float]:
        """Flat counters and gauges for a metrics endpoint (names in Prometheus style)."""
        with self._lock:
            actors = sum(1 for g in self.groups.values() if not g.gone)
            return metrics(list(self.cameras.values()), len(self.nodes), len(self.nodes_lost), actors)

    def summary(self) -> ClusterSummary:
        with self._lock:
            errors = [c.error for c in self.cameras.values() if c.error]
            groups = [{"group": g.key, "node": g.node, "cameras": g.cameras, "cpus": g.cpus,
                       "cores": actor_cores(g.cpus), "lost": g.result is None,
                       "summary": (g.result or {}).get("summary")} for g in self.groups.values()]
            return ClusterSummary(self.spec.name, time.monotonic() - self.started, list(self.cameras.values()),
                                  list(self.nodes_lost), groups, errors[0] if errors else None)

    # nodes ---------------------------------------------------------------------------------
    def _refresh_nodes(self) -> None:
        import ray

        alive: dict[str, NodeInfo] = {}
        for n in ray.nodes():
            if n.get("Alive"):
                alive[n["NodeID"]] = NodeInfo(n["NodeID"], float(n.get("Resources", {}).get("CPU", 0.0)),
                                              str(n.get("NodeManagerAddress", "")))
        now = time.monotonic()
        for nid, info in self.nodes.items():
            if nid not in alive:
                cams = [c.name for c in self.cameras.values() if c.node == nid and c.state in ("starting", "running")]
                self.nodes_lost.append({"node": nid, "address": info.address, "cameras": len(cams),
                                        "detected_s": round(now - self.started, 3), "detected_at": now})
                log.warning("node %s (%s) lost: cameras %s", nid[:12], info.address, ", ".join(cams) or "none")
                for g in self.groups.values():
                    if g.node == nid and not g.gone:
                        g.lose("node died", now, self.cameras, self.removed)
        self.nodes = alive

    # groups --------------------------------------------------------------------------------
    def _launch(self, node: str, cams: list[CameraRecord]) -> None:
        self._serial += 1
        key = f"{self.run_id}-{self._serial}"
        cpus = round(len(cams) * self.options.cpus_per_camera, 4)
        now = time.monotonic()
        holders = [self.groups[c.group] for c in cams if c.group in self.groups]
        wait = max([g.reached + self.options.lease_s - now for g in holders] + [0.0])
        opts = GroupOptions(run_id=self.run_id, output_dir=str(self.options.output_dir), overrides=self.overrides,
                            cpus=cpus, max_frames=self.options.max_frames, requests=self.options.requests,
                            lease_s=self.options.lease_s, start_after_s=round(wait, 3))
        group = launch_group(key, node, cams, self.spec, self.config_path, opts, self.options.max_concurrency, now)
        self.groups[key] = group
        log.info("cameras %s on node %s (%s CPUs, %d cores)", ", ".join(group.cameras), node[:12], cpus,
                 actor_cores(cpus))

    def _place(self, cams: list[CameraRecord]) -> None:
        """Spread ``cams`` over the live nodes with room; the rest wait (pending)."""
        if not cams:
            return
        load: dict[str, int] = {}
        for c in self.cameras.values():
            if c.node and c.state in ("starting", "running"):
                load[c.node] = load.get(c.node, 0) + 1
        # CPUs held on each node by the other runs of this process, and by this run's actors for cameras
        # that ended or were removed (an actor keeps the CPUs it reserved until it ends)
        reserved: dict[str, float] = {}
        for other in list(_RUNS):
            for g in list(other.groups.values()):
                reserved[g.node] = reserved.get(g.node, 0.0) + g.cpus_held(
                    self.cameras if other is self else None, self.options.cpus_per_camera)
        nodes = [NodeInfo(n.node_id, max(0.0, n.cpus - reserved.get(n.node_id, 0.0)), n.address)
                 for n in self.nodes.values()]
        placed, pending = spread([c.name for c in cams], nodes, load, self.options.cpus_per_camera)
        for name in pending:
            cam = self.cameras[name]
            cam.state = "pending"
            if cam.losses:
                cam.losses[-1].pending_polls += 1
        by_node: dict[str, list[CameraRecord]] = {}
        for name, node in placed.items():
            by_node.setdefault(node, []).append(self.cameras[name])
        for node, group in by_node.items():
            size = self.options.group_size or len(group)
            if self.options.max_frames is not None and any(c.part >= 0 for c in group):
                size = 1  # a moved camera's frame limit is what its output holds: one per actor
            for i in range(0, len(group), size):
                self._launch(node, group[i:i + size])

    def _collect_ended(self) -> None:
        import ray

        live = {g.ref: g for g in self.groups.values() if not g.gone}
        if not live:
            return
        ready, _ = ray.wait(list(live), num_returns=len(live), timeout=0)
        now = time.monotonic()
        for ref in ready:
            g = live[ref]
            try:
                result = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the actor or its node died
                g.lose(f"actor died: {type(exc).__name__}", now, self.cameras, self.removed)
                continue
            g.end(result, self.cameras, self.stop_requested, self.removed)

    def _collect_status(self) -> None:
        import ray

        pending = {}
        for g in self.groups.values():
            if g.gone:
                continue
            if g.status_ref is None:
                g.status_ref = g.actor.status.remote()
            pending[g.status_ref] = g
        if not pending:
            return
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=min(0.2, self.options.poll_s))
        now = time.monotonic()
        for ref in ready:
            g = pending[ref]
            g.status_ref = None
            try:
                status = ray.get(ref)
            except Exception:  # noqa: BLE001 - dies with its actor: _collect_ended sees it
                continue
            g.reached = now
            if not g.gone:
                g.take_status(status, self.cameras, now)

    def _replace_lost(self) -> None:
        """Place the lost and the pending cameras (a lost camera's new actor starts it once the lease
        of its old one has run out)."""
        self._place([c for c in self.cameras.values() if c.state in ("pending", "lost")])

    def _abandon(self) -> None:
        """Kill every actor still there (they have ended, or did not stop in time)."""
        for g in self.groups.values():
            g.kill()
            g.gone = True
        for cam in self.cameras.values():
            if cam.state not in ("done", "failed"):
                cam.state = "stopped"
