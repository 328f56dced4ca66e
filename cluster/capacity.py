"""How many Ray CPUs a camera needs, from the costs the thread plan measures on this machine."""

from __future__ import annotations

import logging
import math
from typing import Any

from stages.sources import is_live_uri

__all__ = ["camera_cost_ms", "cpus_per_camera", "DEFAULT_CPUS_PER_CAMERA"]

log = logging.getLogger("vapipe.cluster")

#: used when nothing can be measured here (e.g. the driver has no models)
DEFAULT_CPUS_PER_CAMERA = 1.0
#: frames per second a camera is sized for when --camera-fps is not given
DEFAULT_CAMERA_FPS = 25.0


def camera_cost_ms(graph: Any, sources: list[str], overrides: dict[str, dict[str, Any]] | None = None) -> float:
    """CPU ms of one frame of one camera: decode + host work + CPU inference + encoding, from the thread
    plan's measured (and cached) costs; the first file source stands for all."""
    from pipeline.threads import plan_for_graph

    files = [s for s in sources if not is_live_uri(s)]
    plan = plan_for_graph(graph, (files or sources)[:1], 1, overrides)
    decode = plan.decode_ms[0] if plan.decode_ms else 0.0
    return decode + plan.host_ms + sum(float(m["frame_ms"]) for m in plan.models.values()) + \
        sum(float(e["ms"]) for e in plan.encoders.values())


def cpus_per_camera(graph: Any, sources: list[str], fps: float,
                    overrides: dict[str, dict[str, Any]] | None = None) -> float:
    """Ray CPUs to reserve per camera delivering ``fps`` frames per second (rounded up to 0.05);
    ``DEFAULT_CPUS_PER_CAMERA`` when the costs cannot be measured here."""
    try:
        ms = camera_cost_ms(graph, sources, overrides)
    except Exception as exc:  # noqa: BLE001 - e.g. models or sources only on the nodes
        log.warning("cannot measure the camera cost here (%s); reserving %.2f CPUs per camera", exc,
                    DEFAULT_CPUS_PER_CAMERA)
        return DEFAULT_CPUS_PER_CAMERA
    return max(0.05, math.ceil(ms * fps / 1000.0 / 0.05) * 0.05)
