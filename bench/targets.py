"""Ratios between the modes, and the targets vapipe is held to, as checks.

Targets, every bench: vapipe >= 1.3x naive, >= 1.2x hand-tuned, >= 0.9x the limit
(``1 / (1/decode-alone + 1/infer-alone)``), >= 1.0x vapipe-unplanned (the thread plan
never loses to the runtimes' defaults), the process using >= 90 % of the cores, and
with several cameras, per-camera FPS within 10 % of each other.  Against a peer: its
own target (:data:`bench.peers.registry.PEERS`), and where lines of text have a ground
truth, vapipe reads at least as many as the peer.  vapipe on another engine (``vapipe-ort``)
is a ratio the other way round, ``vapipe-ort/vapipe``, with no target.
"""

from __future__ import annotations

from typing import Any

from .plan import ENGINE_MODES, sweep_requests

__all__ = ["TARGETS", "CPU_TARGET", "CAMERA_SPREAD_MAX", "evaluate"]

TARGETS = {"vapipe/naive": 1.3, "vapipe/hand-tuned": 1.2, "vapipe/limit": 0.9, "vapipe/vapipe-unplanned": 1.0}
CPU_TARGET = 0.9            # vapipe's CPU utilisation (share of all cores) on file sources
CAMERA_SPREAD_MAX = 0.10    # (max - min) / max of vapipe's per-camera FPS


def _check(name: str, value: float, ok: bool) -> dict[str, Any]:
    return {"check": name, "value": round(value, 3), "ok": bool(ok)}


def evaluate(result: dict[str, Any]) -> dict[str, Any]:
    """``limit_fps``, ``ratios`` ({"vapipe/MODE": x}, {"ENGINE-MODE/vapipe": x}) and ``checks`` ([{check, value, ok}])
    of a bench result (its ``modes``, ``peers`` and ``accuracy``)."""
    from .peers.registry import PEERS

    modes = result["modes"]
    out: dict[str, Any] = {}
    dec, inf = modes.get("decode-alone", {}).get("fps"), modes.get("infer-alone", {}).get("fps")
    if dec and inf:
        out["limit_fps"] = round(1.0 / (1.0 / dec + 1.0 / inf), 2)
    vapipe = modes.get("vapipe", {})
    vap = vapipe.get("fps")
    work = vapipe.get("work_ms")
    if work and sum(work.values()) > 0 and result.get("cores"):
        # what vapipe's own work allows: every core busy on the CPU time per frame it observed
        out["work_bound_fps"] = round(1000.0 * result["cores"] / sum(work.values()), 2)
    refs = {m: r.get("fps") for m, r in modes.items()
            if m not in ("vapipe", "decode-alone", "infer-alone", *ENGINE_MODES) and sweep_requests(m) is None}
    refs["limit"] = out.get("limit_fps")
    refs["work-bound"] = out.get("work_bound_fps")
    ratios = {f"vapipe/{m}": round(vap / ref, 3) for m, ref in refs.items() if vap and ref}
    ratios.update({f"{m}/vapipe": round(modes[m]["fps"] / vap, 3) for m in ENGINE_MODES
                   if vap and modes.get(m, {}).get("fps")})
    out["ratios"] = ratios
    checks = [_check(f"{key} >= {target}", ratios[key], ratios[key] >= target)
              for key, target in TARGETS.items() if key in ratios]
    for peer in result.get("peers", {}):
        key = f"vapipe/{peer}"
        if key in ratios:
            checks.append(_check(f"{key} >= {PEERS[peer].target}", ratios[key], ratios[key] >= PEERS[peer].target))
    if vapipe.get("cpu_util") is not None:
        checks.append(_check(f"vapipe CPU >= {CPU_TARGET:.0%} of the cores", vapipe["cpu_util"],
                             vapipe["cpu_util"] >= CPU_TARGET))
    per_cam = vapipe.get("fps_per_camera") or []
    if len(per_cam) > 1 and max(per_cam) > 0:
        spread = (max(per_cam) - min(per_cam)) / max(per_cam)
        out["vapipe_camera_spread"] = round(spread, 3)
        checks.append(_check(f"vapipe per-camera FPS spread <= {CAMERA_SPREAD_MAX:.0%}", spread,
                             spread <= CAMERA_SPREAD_MAX))
    accuracy = result.get("accuracy", {})
    mine = (accuracy.get("vapipe") or {}).get("accuracy")
    for peer in result.get("peers", {}):
        theirs = (accuracy.get(peer) or {}).get("accuracy")
        if mine is not None and theirs is not None:
            checks.append(_check(f"vapipe lines read >= {peer}'s ({theirs:.1%})", mine, mine >= theirs))
    out["checks"] = checks
    return out
