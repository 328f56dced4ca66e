"""``vapipe run NAME --source ... --cluster ADDRESS``: the run on a Ray cluster, from the command line."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["run_on_cluster", "UNSUPPORTED"]

#: run options that act on one process and have no meaning across a cluster
UNSUPPORTED = {"sync": "--sync", "trace": "--trace", "priority": "--priority", "replan": "--replan",
               "cores": "--cores (each actor's budget is its Ray CPUs: --cpus-per-camera)",
               "capture_delay_ms": "--capture-delay-ms", "min_fps": "--min-fps"}


def run_on_cluster(args: Any, spec: Any, config_path: str) -> int:
    """Run ``spec`` (``--set``/``--overrides`` applied) on the cluster named by ``args.cluster``;
    prints the summary (table or ``--json``); returns the exit code."""
    from pipeline.graph import build_graph

    from .capacity import DEFAULT_CAMERA_FPS, cpus_per_camera
    from .connect import connect, parse_address, require_ray
    from .supervisor import ClusterOptions, ClusterRun

    for attr, flag in UNSUPPORTED.items():
        if getattr(args, attr, None):
            raise ValueError(f"{flag.split(' ')[0]} is not supported with --cluster{flag[len(flag.split(' ')[0]):]}")
    parse_address(args.cluster)
    require_ray()
    cpus = args.cpus_per_camera
    if cpus is not None and cpus <= 0:
        raise ValueError(f"--cpus-per-camera must be > 0, got {cpus}")
    if cpus is None:
        fps = DEFAULT_CAMERA_FPS if args.camera_fps is None else args.camera_fps
        if fps <= 0:
            raise ValueError(f"--camera-fps must be > 0, got {fps}")
        cpus = cpus_per_camera(build_graph(spec, config_path), args.source, fps)
    address = connect(args.cluster, log_to_driver=not args.json)
    if args.cameras_per_actor is not None and args.cameras_per_actor < 1:
        raise ValueError(f"--cameras-per-actor must be >= 1, got {args.cameras_per_actor}")
    options = ClusterOptions(output_dir=Path(args.output), cpus_per_camera=cpus, max_frames=args.max_frames,
                             requests=args.requests)
    if args.cameras_per_actor is not None:
        options.group_size = args.cameras_per_actor
    run = ClusterRun(spec, args.source, options,
                     config_path=config_path)
    print(f"cluster {address}: {len(args.source)} cameras, {cpus:g} CPUs reserved per camera", file=sys.stderr)
    restore = _on_signals(run)
    try:
        summary = run.run(progress=None if args.no_progress or args.json else _Progress())
    finally:
        if restore is not None:
            restore()
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2, default=str))
    else:
        print(summary.table())
    stopped = run.stop_requested.is_set()
    bad = [c for c in summary.cameras if c.state == "failed" or (c.state == "stopped" and not stopped)]
    for c in bad:
        print(f"vapipe: error: camera {c.name}: {c.error or c.state}", file=sys.stderr)
    return 1 if bad else 0


def _on_signals(run: Any) -> Any:
    """SIGINT/SIGTERM: stop the run politely (actors finish and close outputs); a second one interrupts."""
    from pipeline.runtime import install_signals

    class _StopRun(threading.Event):
        def set(self) -> None:
            super().set()
            run.stop()

    return install_signals(_StopRun(), threading.Event())


class _Progress:
    """A line every few seconds: cameras per state, frames and rate over the cluster."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self._last = time.monotonic()

    def __call__(self, run: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        cams = list(run.cameras.values())
        states: dict[str, int] = {}
        for c in cams:
            states[c.state] = states.get(c.state, 0) + 1
        fps = sum(c.fps for c in cams if c.state == "running")
        sys.stderr.write(f"{', '.join(f'{n} {s}' for s, n in states.items())} | {sum(c.frames for c in cams)} frames, "
                         f"{fps:.1f} fps on {len(run.nodes)} nodes\n")
        sys.stderr.flush()
