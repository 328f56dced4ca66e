"""The actors of a cluster run as the driver sees them, and what they report to its camera records.

One :class:`ActorGroup` per actor (:class:`cluster.actor.CameraGroup`): the node it runs on, its
cameras and CPUs, its ``run()`` call and its last status.  :func:`launch_group` starts one on a
node for some cameras (each continuing where its last placement stopped); the group's methods
apply what the actor says to the cameras' records (:mod:`cluster.records`): a status (frames, fps,
where a placement started, a lost camera resumed), a final result (done, failed, stopped, lost at
the end of its lease) or its loss (node or actor died).  The supervisor
(:mod:`cluster.supervisor`) decides when and where.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .actor import CameraGroup, CameraTask, GroupOptions, task_dicts
from .records import CameraRecord, Loss, startup_times

__all__ = ["ActorGroup", "launch_group", "count_unseen"]


@dataclass
class ActorGroup:
    """One actor of the run and the cameras it was started with (``key`` unique in the run)."""

    key: str
    actor: Any
    node: str
    cameras: list[str]
    cpus: float
    ref: Any                               # the run() call: ready when the group ends or its actor dies
    status_ref: Any = None
    status: dict[str, Any] | None = None   # the last CameraGroup.status (or the final one it returned)
    reached: float = field(default_factory=time.monotonic)
    result: dict[str, Any] | None = None
    gone: bool = False                     # ended, failed or lost: no longer polled

    def cpus_held(self, cameras: dict[str, CameraRecord] | None = None, cpus_per_camera: float = 0.0) -> float:
        """Ray CPUs the actor holds (all it reserved, until it ends), less ``cpus_per_camera`` for each of
        its cameras running on it per ``cameras`` (the run's own records, whose running cameras placement
        counts apart); 0 once it is gone."""
        if self.gone:
            return 0.0
        if cameras is None:
            return self.cpus
        active = sum(1 for n in self.cameras if cameras[n].group == self.key
                     and cameras[n].state in ("starting", "running"))
        return max(0.0, self.cpus - active * cpus_per_camera)

    def kill(self) -> None:
        """End the actor's process (its CPUs are free for other cameras); nothing if it is gone."""
        import ray

        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def lose(self, reason: str, now: float, cameras: dict[str, CameraRecord], removed: set[str]) -> None:
        """The actor or its node died: the group is gone, and its cameras still on it are lost (a
        :class:`Loss` each, to be placed again), or stopped when ``removed`` meanwhile."""
        self.gone = True
        self.kill()
        for name in self.cameras:
            cam = cameras[name]
            if cam.group != self.key or cam.state not in ("starting", "running"):
                continue
            cam.close_placement()
            cam.fps = 0.0
            if name in removed:  # taken out meanwhile: not placed again
                cam.state = "stopped"
                continue
            cam.state = "lost"
            cam.losses.append(Loss(node=self.node, reason=reason, detected_at=now, seen_seq=cam.last_seq))

    def end(self, result: dict[str, Any], cameras: dict[str, CameraRecord], stopping: threading.Event,
            removed: set[str]) -> None:
        """The group's run() returned ``result``: apply it to its cameras and release its actor
        (``stopping``: set once the run is asked to stop; its cameras then count as stopped)."""
        if self.gone:
            return
        self.result, self.gone = result, True
        self.status = result.get("status") or self.status
        self._apply_result(result, cameras, stopping, removed)
        self.kill()  # its process ends and its CPUs are free for other cameras

    def _apply_result(self, result: dict[str, Any], cameras: dict[str, CameraRecord], stopping: threading.Event,
                      removed: set[str]) -> None:
        summary = result.get("summary") or {}
        stats = {s["source"]: s for s in summary.get("sources", [])}
        lease_lost = result.get("state") == "lease_expired"
        for name in self.cameras:
            cam = cameras[name]
            if cam.group != self.key:
                continue
            s = stats.get(name)
            if s is not None:
                cam.frames_now, cam.dropped = int(s["frames"]), int(s["dropped"])
                cam.last_seq = s.get("last_seq", cam.last_seq)
            error = (s or {}).get("error") or (result.get("error") if s is None else None)
            cam.close_placement()
            cam.fps = 0.0
            if stopping.is_set() or name in removed:
                cam.state = "stopped"
            elif lease_lost:
                cam.state = "lost"
                cam.losses.append(Loss(node=self.node, reason="lease expired", detected_at=time.monotonic(),
                                       seen_seq=cam.last_seq))
            elif error:
                cam.state, cam.error = "failed", error
            else:
                cam.state = "done"

    def take_status(self, status: dict[str, Any], cameras: dict[str, CameraRecord], now: float) -> None:
        """Apply a :meth:`cluster.actor.CameraGroup.status` reply to the group's cameras still on it:
        frames, fps, where the placement started, and a lost camera's first frames again."""
        self.status = status
        starts = status.get("starts", {})
        for name, st in status.get("cameras", {}).items():
            cam = cameras.get(name)
            if cam is None or cam.group != self.key:
                continue
            cam.frames_now, cam.fps, cam.dropped = int(st["frames"]), float(st["fps"]), int(st["dropped"])
            if st.get("last_seq") is not None:
                cam.last_seq = int(st["last_seq"])
            if cam.placements and cam.placements[-1]["start_seq"] is None and name in starts:
                cam.placements[-1]["start_seq"] = starts[name]
            if cam.placements and "first_frame" in status.get("timings", {}):
                cam.placements[-1]["startup_s"] = startup_times(status["timings"])
            if cam.frames_now > 0 and cam.state == "starting":
                cam.state = "running"
                if cam.losses and cam.losses[-1].resumed_at is None:
                    loss = cam.losses[-1]
                    loss.resumed_at = now
                    loss.resume_seq = starts.get(name)
                    loss.exact = status.get("exact", {}).get(name)
                    loss.video_lost = status.get("lost", {}).get(name)
                    count_unseen(cam, loss, status.get("before", {}).get(name))


def count_unseen(cam: CameraRecord, loss: Loss, before: int | None) -> None:
    """The lost placement wrote frames after the driver's last look: its output says how many
    (``before``: frame records the camera's output held when the next placement started)."""
    if not loss.exact or before is None or len(cam.placements) < 2:
        return
    prev = cam.placements[-2]
    prev["frames"] = int(prev.get("frames") or 0) + int(before) - cam.frames_before
    prev["last_seq"] = None if loss.resume_seq is None else int(loss.resume_seq) - 1
    cam.frames_before = int(before)


def launch_group(key: str, node: str, cams: list[CameraRecord], spec: Any, config_path: str,
                 opts: GroupOptions, max_concurrency: int, now: float) -> ActorGroup:
    """Start an actor for ``cams`` on ``node`` (reserving ``opts.cpus`` Ray CPUs there; never moved
    by Ray), each camera continuing after the last frame its previous placement was seen to write,
    and mark them starting there (placed at ``now``, the driver's ``time.monotonic()``)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    tasks = []
    for c in cams:
        c.part += 1
        start = c.start_seq if c.part == 0 else (c.last_seq + 1 if c.last_seq is not None else c.start_seq)
        tasks.append(CameraTask(c.name, c.uri, c.part, start, c.frames))
    remote = ray.remote(CameraGroup).options(
        num_cpus=opts.cpus, max_restarts=0, max_task_retries=0, max_concurrency=max_concurrency,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False), name=f"vapipe-{key}")
    actor = remote.remote(spec.model_dump(), config_path, task_dicts(tasks), asdict(opts))
    group = ActorGroup(key, actor, node, [c.name for c in cams], opts.cpus, actor.run.remote())
    for c in cams:
        c.state, c.node, c.group = "starting", node, key
        c.placements.append({"node": node, "group": key, "start_seq": None, "frames": 0, "last_seq": None})
        if c.losses and c.losses[-1].placed_at is None:
            c.losses[-1].placed_at = now
    return group
