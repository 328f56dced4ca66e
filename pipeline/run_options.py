"""What a run is told: :class:`RunOptions`, and :class:`StageFailure`, the error a stage's
failure becomes (one line naming the stage, the source and the error)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .arbiter import SourcePriority
    from .session import Session
    from .trace import Tracer

__all__ = ["RunOptions", "StageFailure", "check_cluster_options"]

#: command-line options that only mean something with --cluster (vapipe run and vapipe serve)
CLUSTER_OPTIONS = {"--cpus-per-camera": "cpus_per_camera", "--camera-fps": "camera_fps",
                   "--cameras-per-actor": "cameras_per_actor"}


def check_cluster_options(args: Any) -> None:
    """Parsed arguments giving a cluster option without ``--cluster``: a one-line ValueError naming it."""
    if not getattr(args, "cluster", None):
        for flag, dest in CLUSTER_OPTIONS.items():
            if getattr(args, dest, None) is not None:
                raise ValueError(f"{flag} needs --cluster")


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
    # that briefly need it then wait behind the worker (a convoy).  0.5 ms: the same rate
    # as 5 ms and a lower latency with 4 cameras (README, 2-core Xeon).
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

    def user_requests(self, graph: Any) -> dict[str, int]:
        """Requests per camera the run sets (``requests``; 1 with ``sync``) for every inference
        stage of ``graph`` that takes them, by stage name; they are the user's: no plan changes them."""
        if not (self.sync or self.requests):
            return {}
        from .stage import InferStage

        return {name: 1 if self.sync else int(self.requests or 0) for name, cls in graph.classes().items()
                if issubclass(cls, InferStage) and "requests" in cls.Params.model_fields}
