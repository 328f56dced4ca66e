"""Ratios between the modes, and the targets vapipe is held to, as checks.

A ratio is the median of the rounds' own ratios: every round runs each mode once, one after
the other, so a round's ratio is measured side by side and the machine's drift from round to
round (shared machines speed up and slow down by 10-30 % over minutes) cancels out; the ratio
of the modes' median FPS is kept beside it (``ratios_of_medians``).  Without every round of
both modes (a result written by hand), the ratio is the one of the medians.

Targets, every bench: vapipe >= 1.3x naive, >= 1.2x hand-tuned, >= 0.9x the limit
(``1 / (1/decode-alone + 1/infer-alone)``), >= 1.0x vapipe-unplanned (the thread plan
never loses to the runtimes' defaults), the process using >= 90 % of the cores, and
with several cameras, per-camera FPS within 10 % of each other.  Against a peer: its
own target (:data:`bench.peers.registry.PEERS`), and where lines of text have a ground
truth, vapipe reads at least as many as the peer.  vapipe on another engine (``vapipe-ort``)
is a ratio the other way round, ``vapipe-ort/vapipe``, with no target.
"""

from __future__ import annotations

import statistics
from typing import Any

from .plan import ENGINE_MODES, sweep_requests

__all__ = ["TARGETS", "CPU_TARGET", "CAMERA_SPREAD_MAX", "evaluate"]

TARGETS = {"vapipe/naive": 1.3, "vapipe/hand-tuned": 1.2, "vapipe/limit": 0.9, "vapipe/vapipe-unplanned": 1.0}
CPU_TARGET = 0.9            # vapipe's CPU utilisation (share of all cores) on file sources
CAMERA_SPREAD_MAX = 0.10    # (max - min) / max of vapipe's per-camera FPS


def _limit(decode_fps: float, infer_fps: float) -> float:
    return 1.0 / (1.0 / decode_fps + 1.0 / infer_fps)


def _paired(num: list[float] | None, den: list[float] | None) -> list[float] | None:
    """Each round's ratio ``num[i] / den[i]``, or None unless both have the same rounds, all > 0."""
    if not num or not den or len(num) != len(den) or min(num) <= 0 or min(den) <= 0:
        return None
    return [a / b for a, b in zip(num, den)]


def _check(name: str, value: float, ok: bool) -> dict[str, Any]:
    return {"check": name, "value": round(value, 3), "ok": bool(ok)}


def evaluate(result: dict[str, Any]) -> dict[str, Any]:
    """``limit_fps``, ``ratios`` ({"vapipe/MODE": x}, {"ENGINE-MODE/vapipe": x}; medians of the
    rounds' ratios), ``ratios_of_medians``, ``ratio_rounds`` ({key: [each round's ratio]}) and
    ``checks`` ([{check, value, ok}]) of a bench result (its ``modes``, ``peers`` and ``accuracy``)."""
    from .peers.registry import PEERS

    modes = result["modes"]
    out: dict[str, Any] = {}
    dec, inf = modes.get("decode-alone", {}), modes.get("infer-alone", {})
    rounds = {m: r.get("rounds") for m, r in modes.items()}
    if dec.get("fps") and inf.get("fps"):
        out["limit_fps"] = round(_limit(dec["fps"], inf["fps"]), 2)
        if _paired(dec.get("rounds"), inf.get("rounds")):   # the same rounds, all > 0
            rounds["limit"] = [_limit(d, i) for d, i in zip(dec["rounds"], inf["rounds"])]
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
    pairs = {f"vapipe/{m}": (vap, ref, rounds.get("vapipe"), rounds.get(m)) for m, ref in refs.items()}
    pairs.update({f"{m}/vapipe": (modes.get(m, {}).get("fps"), vap, rounds.get(m), rounds.get("vapipe"))
                  for m in ENGINE_MODES})
    ratios, of_medians, by_round = {}, {}, {}
    for key, (num, den, num_rounds, den_rounds) in pairs.items():
        if not num or not den:
            continue
        of_medians[key] = round(num / den, 3)
        each = _paired(num_rounds, den_rounds)
        ratios[key] = round(statistics.median(each), 3) if each else of_medians[key]
        if each:
            by_round[key] = [round(x, 3) for x in each]
    out["ratios"] = ratios
    out["ratios_of_medians"] = of_medians
    out["ratio_rounds"] = by_round
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
