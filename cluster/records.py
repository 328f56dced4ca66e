"""What the driver knows about each camera of a cluster run, and the summary it prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["STATES", "Loss", "CameraRecord", "ClusterSummary", "metrics", "startup_times"]

#: camera states: waiting for room (pending), actor starting, producing frames, its node or actor lost
#: (waiting to be placed again), ended (done), failed (a stage failed; not restarted), stopped by the user
STATES = ("pending", "starting", "running", "lost", "done", "failed", "stopped")


@dataclass
class Loss:
    """One loss of a camera's placement; times are ``time.monotonic()`` of the driver.

    ``seen_seq``: the last seq the driver saw written before the loss; ``resume_seq``: where the
    next placement started (``exact``: read from the camera's own JSON Lines output; otherwise the
    driver's ``seen_seq + 1``)."""

    node: str
    reason: str
    detected_at: float
    seen_seq: int | None = None
    placed_at: float | None = None
    resumed_at: float | None = None      # first frame of the next placement seen
    resume_seq: int | None = None
    exact: bool | None = None
    pending_polls: int = 0               # polls the camera waited for room
    #: frames of the lost placement in its JSON Lines but not in its video segment (in flight in the
    #: encoder); None: no video output, or not readable from the new node
    video_lost: int | None = None

    @property
    def resumed_after_s(self) -> float | None:
        return None if self.resumed_at is None else self.resumed_at - self.detected_at


@dataclass
class CameraRecord:
    """A camera of the run: where it runs and what it has done (``frames``: over all its placements)."""

    name: str
    uri: str
    live: bool
    state: str = "pending"
    node: str | None = None
    group: str | None = None
    part: int = -1                       # placements so far - 1
    start_seq: int = 0                   # where the current placement started
    last_seq: int | None = None
    frames_before: int = 0               # frames of finished placements
    frames_now: int = 0                  # frames of the current placement
    fps: float = 0.0
    dropped: int = 0
    error: str | None = None
    losses: list[Loss] = field(default_factory=list)
    placements: list[dict[str, Any]] = field(default_factory=list)  # node, group, start_seq, frames

    @property
    def frames(self) -> int:
        return self.frames_before + self.frames_now

    def close_placement(self) -> None:
        """The current placement is over: keep its frames."""
        if self.placements:
            self.placements[-1]["frames"] = self.frames_now
            self.placements[-1]["last_seq"] = self.last_seq
        self.frames_before += self.frames_now
        self.frames_now = 0

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "losses"}
        d["frames"] = self.frames
        d["losses"] = [{**asdict(x), "resumed_after_s": None if x.resumed_after_s is None
                        else round(x.resumed_after_s, 3)} for x in self.losses]
        return d


@dataclass
class ClusterSummary:
    """The run as the driver saw it: per camera, per node lost, and every placement's own summary."""

    pipeline: str
    wall_s: float
    cameras: list[CameraRecord]
    nodes_lost: list[dict[str, Any]]
    groups: list[dict[str, Any]]         # per actor: node, cameras, cpus, and its run summary
    error: str | None = None

    @property
    def total_fps(self) -> float:
        return sum(c.fps for c in self.cameras if c.state == "running")

    def as_dict(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "wall_s": round(self.wall_s, 3),
                "cameras": [c.as_dict() for c in self.cameras], "nodes_lost": self.nodes_lost,
                "groups": self.groups, "error": self.error}

    def table(self) -> str:
        lines = [f"pipeline {self.pipeline} on the cluster, {self.wall_s:.1f} s, "
                 f"{len({g['node'] for g in self.groups})} nodes, {len(self.groups)} actors"]
        lines.append(f"{'camera':<28} {'state':<8} {'frames':>7} {'last seq':>8} {'dropped':>8} "
                     f"{'placements':>10}  node")
        for c in self.cameras:
            last = "-" if c.last_seq is None else str(c.last_seq)
            lines.append(f"{c.name[:28]:<28} {c.state:<8} {c.frames:>7} {last:>8} {c.dropped:>8} "
                         f"{len(c.placements):>10}  {(c.node or '-')[:12]}")
            for loss in c.losses:
                after = ("not yet" if loss.resumed_after_s is None
                         else f"frames again after {loss.resumed_after_s:.1f} s")
                how = "from its output" if loss.exact else "from the last seq seen"
                startup = c.placements[-1].get("startup_s") if c.placements else None
                waited = "" if loss.placed_at is None else f" (placed after {loss.placed_at - loss.detected_at:.1f} s"
                if waited and startup:
                    waited += ", actor start " + ", ".join(f"{k} {v:.1f} s" for k, v in startup.items())
                video = "" if loss.video_lost is None else f"; {loss.video_lost} frames in flight lost from its video"
                lines.append(f"  lost on node {loss.node[:12]} ({loss.reason}); continued at seq "
                             f"{loss.resume_seq} {how}{video}; {after}{waited + ')' if waited else ''}")
            if c.error:
                lines.append(f"  error: {c.error}")
        for n in self.nodes_lost:
            lines.append(f"node {n['node'][:12]} lost ({n['address']}): {n['cameras']} cameras, detected "
                         f"{n['detected_s']:.1f} s into the run")
        return "\n".join(lines)


def metrics(cameras: list[CameraRecord], nodes_alive: int, nodes_lost: int, actors: int) -> dict[str, float]:
    """Counters and gauges of a run, named in Prometheus style (``name{label="value"}``)."""
    out: dict[str, float] = {f'vapipe_cluster_cameras{{state="{s}"}}': 0 for s in STATES}
    for c in cameras:
        out[f'vapipe_cluster_cameras{{state="{c.state}"}}'] += 1
        out[f'vapipe_camera_frames_total{{camera="{c.name}"}}'] = c.frames
        out[f'vapipe_camera_fps{{camera="{c.name}"}}'] = c.fps if c.state == "running" else 0.0
        out[f'vapipe_camera_dropped_total{{camera="{c.name}"}}'] = c.dropped
        out[f'vapipe_camera_restarts_total{{camera="{c.name}"}}'] = len(c.losses)
    out["vapipe_cluster_nodes_alive"] = nodes_alive
    out["vapipe_cluster_nodes_lost_total"] = nodes_lost
    out["vapipe_cluster_camera_losses_total"] = sum(len(c.losses) for c in cameras)
    out["vapipe_cluster_actors"] = actors
    return out


def startup_times(t: dict[str, float]) -> dict[str, float]:
    """Seconds an actor spent starting (from its wall-clock ``timings``): process to actor, loading the
    pipeline, waiting for the earlier owner's lease, and on to the first frame out (plan, models, sources)."""
    return {"process": round(t["init"] - t["process"], 2), "imports": round(t["imported"] - t["run"], 2),
            "lease": round(t["started"] - t["imported"], 2), "first_frame": round(t["first_frame"] - t["started"], 2)}
