"""What one benchmark worker process is asked to run, and the names of the modes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["BenchPlan", "BenchError", "BASE_MODES", "VAPIPE_MODES", "ENGINE_MODES", "sweep_mode", "sweep_requests"]

#: modes every bench can run (peers and the requests sweep come on top)
BASE_MODES = ("naive", "hand-tuned", "vapipe", "vapipe-sync", "vapipe-unplanned", "decode-alone", "infer-alone")
#: vapipe with every inference stage on another engine (``--engine``): mode -> engine
ENGINE_MODES = {"vapipe-ort": "onnxruntime"}
#: modes that run vapipe's own runtime
VAPIPE_MODES = ("vapipe", "vapipe-sync", "vapipe-unplanned", *ENGINE_MODES)
_SWEEP_PREFIX = "vapipe-r"


class BenchError(RuntimeError):
    """A benchmark mode failed; the message is one line naming the mode."""


@dataclass
class BenchPlan:
    """Everything a worker subprocess needs (passed as JSON on its command line)."""

    pipeline: str
    config: str                     # pipeline file (absolute path)
    source: str                     # video file (absolute path)
    cameras: int = 1
    frames: int = 0                 # per camera
    width: int = 0                  # source size, pixels
    height: int = 0
    loop: bool = False              # the source is shorter than ``frames``
    out: str = "bench-output"
    record_frames: int = 1000       # camera 0's first frames kept for the agreement checks
    sets: list[str] = field(default_factory=list)                       # STAGE.PARAM=VALUE, every mode
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)  # vapipe modes only (vapipe tune)
    peer: dict[str, Any] = field(default_factory=dict)                  # a peer mode's settings (model files, ...)
    precision: dict[str, str] = field(default_factory=dict)  # stage -> the precision vapipe's plan chose (baselines)


def sweep_mode(requests: int) -> str:
    """Mode name of vapipe run with ``requests`` infer requests per camera."""
    return f"{_SWEEP_PREFIX}{requests}"


def sweep_requests(mode: str) -> int | None:
    """The requests count of a sweep mode (``vapipe-r3`` -> 3), else None."""
    if mode.startswith(_SWEEP_PREFIX) and mode[len(_SWEEP_PREFIX):].isdigit():
        return int(mode[len(_SWEEP_PREFIX):])
    return None
