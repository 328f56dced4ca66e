"""``vapipe serve --cluster``: the service's instances with their cameras on a Ray cluster.

:class:`ClusterBackend` is a :class:`service.backend.Backend`: each instance is a
:class:`cluster.supervisor.ClusterRun` of its pipeline, its cameras spread over the nodes
(one actor per node and group of cameras, moved when a node dies), and the server process
is the Ray driver.  :class:`ClusterHandle` answers the instance manager from what the run
gathers from its actors every poll: camera states, frames, rates, drops, latency
histograms, queue depths, stage latencies and MQTT counters (``CameraGroup.status``).

Outputs are written by the node that runs a camera, under the instance's output directory
(made absolute here, so a shared file system gathers them).  Every camera needs files of its
own (a moved camera continues its JSON Lines file): two cameras resolving to the same path
are refused, and so is a metadata sink writing one JSON array (``format: json``).  Live
pictures are not available: the frames stay on the nodes.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

from pipeline.stats import LatencyStats

from .connect import connect, parse_address, require_ray
from .records import STATES
from .supervisor import ClusterOptions, ClusterRun

__all__ = ["ClusterBackend", "ClusterHandle"]

log = logging.getLogger("vapipe.serve")


class ClusterHandle:
    """A running instance: a :class:`ClusterRun` supervised on a thread of its own until its cameras
    end or :meth:`stop`; then ``on_end(handle)``."""

    def __init__(self, backend: "ClusterBackend", instance_id: str, run: ClusterRun,
                 on_end: Callable[["ClusterHandle"], None]) -> None:
        self.backend, self.instance_id, self.run = backend, instance_id, run
        self._on_end = on_end
        self._done = threading.Event()
        self._failure: str | None = None
        self._add_lock = threading.Lock()
        self._runner = threading.Thread(target=self._supervise, name=f"cluster:{instance_id[:8]}", daemon=True)
        self._runner.start()

    def _supervise(self) -> None:
        try:
            self.run.run()
        except Exception as exc:  # noqa: BLE001 - e.g. the driver lost the cluster: the instance's error
            self._failure = f"cluster run failed: {' '.join(str(exc).split())[:200] or type(exc).__name__}"
            log.warning("instance %s: %s", self.instance_id, self._failure)
            try:
                self.run.stop()
            except Exception:  # noqa: BLE001 - nothing left to stop
                pass
        finally:
            self.backend.release(self.instance_id)
            try:  # the instance's final state first: stop() returns once it is set
                self._on_end(self)
            finally:
                self._done.set()

    # control ---------------------------------------------------------------------------------
    def add_source(self, uri: str) -> str:
        """Place one more camera (an actor of its own on the node with the fewest cameras; pending
        while no node has room).  RuntimeError once the instance ends; ValueError if its files would
        be another camera's."""
        if self._done.is_set():
            raise RuntimeError("the instance has ended")
        with self._add_lock:
            name = self.run.camera_name(uri)
            self.backend.claim(self.instance_id, self.run, [name])
            try:
                return self.run.add_camera(uri, name)
            except BaseException:
                self.backend.release(self.instance_id, [name])
                raise

    def remove_source(self, source_id: str) -> None:
        """Stop one camera (its outputs closed before this returns); KeyError if it is not there."""
        self.run.remove_camera(source_id)

    def stop(self) -> None:
        self.run.stop()
        self._done.wait(self.run.options.stop_timeout_s + 10)

    def finished(self) -> bool:
        return self._done.is_set()

    def error(self) -> str | None:
        if self._failure:
            return self._failure
        snap = self.run.snapshot()["cameras"]
        errors = [f"camera {n}: {c['error']}" for n, c in snap.items() if c["error"] and not c["removed"]]
        return errors[0] if errors else None

    # what the driver gathered ----------------------------------------------------------------
    def sources(self) -> list[dict[str, Any]]:
        """Per camera not removed: the keys of ``Session.sources()`` (counters summed over the camera's
        placements), plus its node, its cluster state and its losses."""
        from service.security import redact

        cams = self.run.snapshot()["cameras"]
        groups = self.run.group_statuses()
        out = []
        for name, c in cams.items():
            if c["removed"]:
                continue
            parts = [g["status"]["cameras"][name] for g in groups
                     if g["status"] is not None and name in g["status"].get("cameras", {})]
            current = next((g["status"]["cameras"][name] for g in groups if g["group"] == c["group"]
                            and not g["gone"] and g["status"] is not None
                            and name in g["status"].get("cameras", {})), None)
            running = c["state"] == "running"
            out.append({
                "id": name, "uri": redact(c["uri"]), "state": _source_state(c["state"], current),
                "frames": int(c["frames"]), "fps": float(c["fps"]) if running else 0.0,
                "dropped": sum(int(p["dropped"]) for p in parts),
                "decode_errors": sum(int(p.get("decode_errors", 0)) for p in parts),
                "reconnects": sum(int(p.get("events", {}).get("reconnecting", 0)) for p in parts),
                "queue_packets": int(current.get("queue_packets", 0)) if current and running else 0,
                "queue_frames": int(current.get("queue_frames", 0)) if current and running else 0,
                "in_flight": dict(current.get("in_flight", {})) if current and running else {},
                "latency": _histogram([p["latency"] for p in parts if "latency" in p]),
                "error": c["error"], "node": c["node"], "cluster_state": c["state"], "losses": len(c["losses"])})
        return out

    def stages(self) -> dict[str, LatencyStats]:
        """Per stage, the latency histogram of every actor the instance had, summed."""
        per_stage: dict[str, list[dict[str, Any]]] = {}
        for g in self.run.group_statuses():
            for stage, lat in ((g["status"] or {}).get("stages") or {}).items():
                per_stage.setdefault(stage, []).append(lat)
        return {stage: _histogram(parts) for stage, parts in per_stage.items()}

    def plan(self) -> dict[str, str]:
        opts = self.run.options
        per_actor = str(opts.group_size) if opts.group_size else "all of a node's"
        return {"backend": "ray", "cluster": self.backend.address, "cpus_per_camera": f"{opts.cpus_per_camera:g}",
                "cameras_per_actor": per_actor,
                "summary": f"Ray cluster {self.backend.address}: {opts.cpus_per_camera:g} CPUs per camera, "
                           f"up to {per_actor} cameras per actor, each actor's thread plan sized to its CPUs"}

    def publishers(self) -> list[dict[str, int]]:
        """MQTT publishers of the actors running now."""
        return [p for g in self.run.group_statuses() if not g["gone"] and g["status"] is not None
                for p in g["status"].get("publishers", [])]

    def watch(self, source_id: str) -> Any:
        if source_id not in {s["id"] for s in self.sources()}:
            raise KeyError(source_id)
        raise NotImplementedError(f"live pictures are not available for instances on a Ray cluster: camera "
                                  f"{source_id} runs on another node; read its outputs or metadata destination")

    def live_stats(self) -> dict[str, Any]:
        return {"viewers": {}, "produced": {}}

    def cluster_stats(self) -> dict[str, Any]:
        """Cameras per cluster state (removed ones left out), actors running, losses per camera."""
        cams = {n: c for n, c in self.run.snapshot()["cameras"].items() if not c["removed"]}
        states = {s: 0 for s in STATES}
        for c in cams.values():
            states[c["state"]] += 1
        actors = sum(1 for g in self.run.group_statuses() if not g["gone"])
        return {"cameras": states, "actors": actors, "losses": {n: len(c["losses"]) for n, c in cams.items()}}


class ClusterBackend:
    """Instances on the Ray cluster at ``address`` (this process connects to it now: a one-line
    :class:`cluster.connect.ClusterError` if Ray is missing or the cluster cannot be reached).

    ``cpus_per_camera``: Ray CPUs each camera reserves (default: its cost measured here at
    ``camera_fps``, per instance); ``cameras_per_actor``: cameras per actor process at most."""

    def __init__(self, address: str, cpus_per_camera: float | None = None, camera_fps: float = 25.0,
                 cameras_per_actor: int | None = None, stop_timeout_s: float = 30.0) -> None:
        if cpus_per_camera is not None and cpus_per_camera <= 0:
            raise ValueError(f"--cpus-per-camera must be > 0, got {cpus_per_camera}")
        if camera_fps <= 0:
            raise ValueError(f"--camera-fps must be > 0, got {camera_fps}")
        if cameras_per_actor is not None and cameras_per_actor < 1:
            raise ValueError(f"--cameras-per-actor must be >= 1, got {cameras_per_actor}")
        parse_address(address)
        ray: Any = require_ray()
        self.cpus_per_camera, self.camera_fps = cpus_per_camera, camera_fps
        self.cameras_per_actor, self.stop_timeout_s = cameras_per_actor, stop_timeout_s
        self._owns_connection = not ray.is_initialized()
        self.address = connect(address)
        self._lock = threading.Lock()
        self._paths: dict[str, tuple[str, str]] = {}   # output file -> (instance, camera) writing it
        self._seen_alive: set[str] = set()
        self._lost: set[str] = set()
        self.cluster_stats()

    def check(self, spec: Any, sources: list[str]) -> None:
        """Refuse what a cluster cannot run (ValueError, one line): a metadata sink writing one JSON array."""
        for st in spec.stages:
            if st.type == "metadata" and st.params.get("format") == "json":
                raise ValueError(f"stage {st.name}: format 'json' (one JSON array; destination.metadata.format of "
                                 "a request) cannot be written on a Ray cluster, where a camera moved to another "
                                 "node continues its file; use 'json-lines'")

    def start(self, instance_id: str, spec: Any, sources: list[str], output_dir: Path,
              on_end: Callable[[ClusterHandle], None], stopping: threading.Event | None = None) -> ClusterHandle:
        """Place the instance's cameras (those without room wait as pending) and supervise them
        (placing is quick: a stop meanwhile stops the handle once it is up)."""
        from pipeline.graph import build_graph

        from .capacity import cpus_per_camera

        self.check(spec, sources)
        cpus = self.cpus_per_camera
        if cpus is None:
            cpus = cpus_per_camera(build_graph(spec, "request"), sources, self.camera_fps)
        options = ClusterOptions(output_dir=Path(output_dir).resolve(), cpus_per_camera=cpus,
                                 stop_timeout_s=self.stop_timeout_s)
        if self.cameras_per_actor is not None:
            options.group_size = self.cameras_per_actor
        run = ClusterRun(spec, sources, options, config_path="request")
        self.claim(instance_id, run, list(run.cameras))
        try:
            run.start()
        except BaseException:
            self.release(instance_id)
            run.stop()
            raise
        log.info("instance %s: %d cameras on the Ray cluster %s, %g CPUs each", instance_id, len(sources),
                 self.address, cpus)
        return ClusterHandle(self, instance_id, run, on_end)

    # output files ------------------------------------------------------------------------------
    def claim(self, instance_id: str, run: ClusterRun, cameras: list[str]) -> None:
        """Reserve the output files of ``cameras``; ValueError if one is another camera's."""
        from .resume import sink_paths

        wanted: dict[str, tuple[str, str]] = {}
        for name in cameras:
            for kind in ("jsonl", "video"):
                for path in sink_paths(run.graph, run.overrides, run.options.output_dir, name, kind).values():
                    key = str(path)
                    with self._lock:
                        holder = wanted.get(key) or self._paths.get(key)
                    if holder is not None:
                        whose = f"camera {holder[1]}" + ("" if holder[0] == instance_id else f" of instance {holder[0]}")
                        raise ValueError(f"camera {name} would write {path}, which {whose} writes: on a Ray cluster "
                                         "every camera needs files of its own (put {source} in the path)")
                    wanted[key] = (instance_id, name)
        with self._lock:
            self._paths.update(wanted)

    def release(self, instance_id: str, cameras: list[str] | None = None) -> None:
        """Free the files of ``cameras`` of the instance (all of them by default)."""
        with self._lock:
            for key, (iid, name) in list(self._paths.items()):
                if iid == instance_id and (cameras is None or name in cameras):
                    del self._paths[key]

    # cluster-wide metrics ------------------------------------------------------------------------
    def cluster_stats(self) -> dict[str, float]:
        """Nodes alive, Ray CPUs on them, and nodes lost since this backend started (as Ray reports them)."""
        import ray

        try:
            nodes = ray.nodes()
        except Exception:  # noqa: BLE001 - the cluster is gone: nothing to report
            return {}
        alive = {n["NodeID"] for n in nodes if n.get("Alive")}
        cpus = sum(float(n.get("Resources", {}).get("CPU", 0.0)) for n in nodes if n.get("Alive"))
        with self._lock:
            self._seen_alive |= alive
            self._lost |= {n["NodeID"] for n in nodes if not n.get("Alive")} & self._seen_alive
            return {"nodes_alive": float(len(alive)), "cpus": cpus, "nodes_lost": float(len(self._lost))}

    def close(self) -> None:
        """Disconnect from the cluster if this backend connected (instances are stopped before)."""
        if self._owns_connection:
            import ray

            ray.shutdown()


def _source_state(cluster_state: str, current: dict[str, Any] | None) -> str:
    """A camera's state in the service's terms: its decoder's while it runs, ``ended`` once done or
    stopped, else the cluster's (pending, starting, lost, failed)."""
    if cluster_state == "running":
        return str((current or {}).get("state") or "streaming")
    return {"done": "ended", "stopped": "ended"}.get(cluster_state, cluster_state)


def _histogram(parts: list[dict[str, Any]]) -> LatencyStats:
    """Latency histograms (``cluster.actor.latency_dict``) summed into one LatencyStats (buckets only)."""
    lat = LatencyStats(keep=1)
    for p in parts:
        lat.count += int(p["count"])
        lat.total_ms += float(p["total_ms"])
        for i, n in enumerate(p["buckets"][:len(lat.buckets)]):
            lat.buckets[i] += int(n)
    return lat
