"""Request priorities under load: one high-priority camera and 7 normal ones on a shared detector.

First the capacity C of the pipeline is measured (frames per second of the 8 cameras
together, offering 30 fps each as live cameras, or unpaced: the more of the two). Then, for
offered loads L = 0.5, 1, 1.5 and 2 x C, the cameras deliver L x C frames per second in all,
as live cameras do (the newest frames kept, the dropped ones counted): camera 0 at its share
of the capacity, C / 8, at every load, as a real camera keeps its rate whatever the others do,
and the 7 others the rest, (L x C - C / 8) / 7 each.  (With camera 0's own rate growing with
the load too, from C / 16 to 3 C / 16, its latency measured its own load as well as the
others': at 1.5 x C it waited over 1 ms for a stream on 1-3 % of its frames, against at most
about 1 % at one rate, and its p99 there was 1.12-1.76 times its p99 at 0.5 x C in 6
measurements, against 1.01-1.48 in 12 at one rate, on a 2-core AMD EPYC Zen 5.)  With
priorities (camera 0 ``high``, the others ``normal`` with a guaranteed ``--min-fps``) in
:data:`LOAD_ROUNDS` rounds interleaved over the loads (camera 0's latency over the frames of
all of them), and once without.  Reported per run: camera 0's p50/p99
end-to-end latency in the steady state (the first :data:`WARMUP_S` of each camera, first
inferences and threads starting, are not load) and its drops, the slowest normal camera's
rate, the total rate. Last, with camera 0 idle (it sends one frame, then nothing), the
total rate with the arbiter against without (what priorities cost when nobody needs them):
the median of the ratios of :data:`IDLE_ROUNDS` interleaved pairs of runs, in turn one order
and the other.

    python -m bench.priorities [--seconds 8] [--min-fps 2] [--out bench-output/priorities]

Checks printed at the end: camera 0's p99 at 1.5 x C within
1.2 x its p99 at 0.5 x C and no drops after the first :data:`WARMUP_S` of any round (the
frames a camera drops while threads and first inferences start are printed apart); every
normal camera at least ``--min-fps``; the run
without priorities shows camera 0's latency growing with the load, and with priorities its p99
at 1.5 x C is at most a quarter of what it is without; throughput with camera 0 idle at least
95 % of the run without priorities.  :func:`checks` says which of them hold on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.arbiter import SourcePriority
from pipeline.config import load_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline

ROOT = Path(__file__).resolve().parents[1]
CAMERAS = 8
LOADS = (0.5, 1.0, 1.5, 2.0)
SIZE = (640, 360)
#: latency samples of each camera's first seconds (first inferences, threads starting) are left out
WARMUP_S = 1.0
#: interleaved rounds of the idle comparison (on a shared 2-core machine single 6 s runs of the
#: same work scatter by +-10 %: the ratio of two is mostly noise).  Each pair runs in the
#: other order than the one before: with a fixed order a machine speeding up over the rounds
#: favoured the mode run second in every pair (a fresh-clone run: 5-12 % in four pairs of five,
#: each run faster than the one before)
IDLE_ROUNDS = 6
#: rounds of each load with priorities (camera 0's p99 is taken over the frames of all of them)
LOAD_ROUNDS = 5
#: with priorities, camera 0's p99 at 1.5x the capacity is at most this share of its p99 without
#: (the arbiter takes away nearly all of its wait behind the others' requests: 0.11-0.15 of it
#: in the measurements of a 2-core AMD EPYC Zen 5, whatever the host's noise)
MECHANISM_SHARE = 0.25


def _scene(fps: float, frames: int) -> str:
    return f"testsrc://bars?width={SIZE[0]}&height={SIZE[1]}&fps={fps:.3f}&frames={frames}"


def _graph(pipeline: str) -> Any:
    cfg = load_config(str(ROOT / "pipelines.yaml"), check_files=False)
    spec = cfg.get(pipeline)
    spec = spec.model_copy(update={"stages": [s for s in spec.stages if s.type not in ("encode", "metadata")]})
    return build_graph(spec, str(ROOT / "pipelines.yaml"))


def _run(graph: Any, sources: list[str], out: Path, paced: bool, priorities: list[SourcePriority] | None,
         cores: int | None, fps: float = 30.0) -> dict[str, Any]:
    """One run; ``fps``: camera 0's rate (its first WARMUP_S of frames are start-up)."""
    decode = {"live": True, "realtime": True} if paced else {}
    opts = RunOptions(output_dir=out, handle_signals=False, overrides={graph.source: decode}, cores=cores,
                      priorities=priorities)
    summary = run_pipeline(graph, sources, opts)
    if summary.error:
        raise RuntimeError(summary.error)
    cams, camera0_ms = [], []
    for i, s in enumerate(summary.sources):
        # the steady state: the samples after the first WARMUP_S seconds (at most half of them)
        skip = min(s.latency.count // 2, math.ceil(fps * WARMUP_S))
        lat = s.latency.summary(skip=skip)
        # drops likewise: those of the first WARMUP_S are start-up, reported apart
        steady = s.dropped_after(s.started + WARMUP_S)
        cams.append({"fps": round(s.fps, 2), "frames": s.processed, "dropped": steady,
                     "dropped_warmup": s.dropped - steady,
                     "p50_ms": round(lat["p50_ms"], 1), "p99_ms": round(lat["p99_ms"], 1),
                     "priority": s.priority})
        if i == 0:
            camera0_ms = s.latency.samples()[skip:].tolist()
    return {"total_fps": round(summary.total_fps, 2), "cameras": cams, "camera0_ms": camera0_ms}


def _over_rounds(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One load's runs of one mode as one: the run of median camera-0 p99 (its rates), camera 0's
    drops (after the warm-up and during it) summed over the rounds, and its p50/p99 over the steady-state frames
    of every round together (a p99 of one short run is nearly its worst frame, and the median of
    a few such is still one frame's luck); every round's own p99 is kept."""
    middle = sorted(rs, key=lambda r: r["cameras"][0]["p99_ms"])[len(rs) // 2]
    pooled = np.concatenate([np.asarray(r["camera0_ms"], np.float64) for r in rs])
    cam0 = dict(middle["cameras"][0])
    for key in ("dropped", "dropped_warmup"):   # camera 0 drops nothing in any round
        cam0[key] = sum(r["cameras"][0][key] for r in rs)
    if len(pooled):
        cam0.update(p50_ms=round(float(np.percentile(pooled, 50)), 1), p99_ms=round(float(np.percentile(pooled, 99)), 1))
    return {"total_fps": middle["total_fps"], "cameras": [cam0, *middle["cameras"][1:]],
            "p99_rounds": [r["cameras"][0]["p99_ms"] for r in rs]}


def _levels(min_fps: float) -> list[SourcePriority]:
    return [SourcePriority("high", min_fps)] + [SourcePriority("normal", min_fps) for _ in range(CAMERAS - 1)]


def run(pipeline: str, seconds: float, min_fps: float, out: Path, cores: int | None = None,
        loads: tuple[float, ...] = LOADS, log: Any = print, idle_rounds: int = IDLE_ROUNDS) -> dict[str, Any]:
    """The sweep and its checks (``idle_rounds`` 0: without the idle comparison and its check)."""
    graph = _graph(pipeline)
    out.mkdir(parents=True, exist_ok=True)
    # capacity: what the pipeline delivers when the cameras offer more than it can take (live
    # cameras at 30 fps each, the newest frames kept), and unpaced files, whichever is more
    overload = _run(graph, [_scene(30, int(30 * seconds))] * CAMERAS, out / "capacity-live", True, None, cores)
    unpaced = _run(graph, [_scene(25, max(20, int(seconds * 8)))] * CAMERAS, out / "capacity", False, None, cores)
    capacity = max(overload["total_fps"], unpaced["total_fps"])
    log(f"capacity: {capacity:.1f} fps ({overload['total_fps']:.1f} from {CAMERAS} live cameras offering 30 fps "
        f"each, {unpaced['total_fps']:.1f} unpaced; {pipeline}, {SIZE[0]}x{SIZE[1]})")
    result: dict[str, Any] = {"pipeline": pipeline, "capacity_fps": capacity, "min_fps": min_fps, "loads": {}}
    runs: dict[float, dict[str, list[dict[str, Any]]]] = {load: {"priorities": [], "none": []} for load in loads}
    for k in range(LOAD_ROUNDS):  # rounds interleaved over the loads: the machine's drift weighs on all alike
        for load in loads:
            fps0 = capacity / CAMERAS                        # camera 0: its share, at every load
            fps = (load * capacity - fps0) / (CAMERAS - 1)   # the others: the rest of the load
            sources = [_scene(fps0, int(fps0 * seconds))] + [_scene(fps, int(fps * seconds))] * (CAMERAS - 1)
            for mode, prio in (("priorities", _levels(min_fps)), ("none", None)):
                if mode == "none" and k:
                    continue  # without priorities the latency grows many times over: one round shows it
                r = _run(graph, sources, out / f"{mode}-{load}-{k}", True, prio, cores, fps0)
                runs[load][mode].append(r)
                c0 = r["cameras"][0]
                slowest = min(c["fps"] for c in r["cameras"][1:])
                log(f"load {load:.1f}x ({fps0:.1f} fps camera 0, {fps:.1f} the others) {mode:<10} "
                    f"camera0 p50 {c0['p50_ms']:6.1f} p99 "
                    f"{c0['p99_ms']:6.1f} ms, dropped {c0['dropped']:3d} (+{c0['dropped_warmup']} in the first "
                    f"{WARMUP_S:g} s); slowest normal {slowest:5.1f} fps; "
                    f"total {r['total_fps']:6.1f} fps")
    for load, by_mode in runs.items():
        result["loads"][str(load)] = {mode: _over_rounds(rs) for mode, rs in by_mode.items()}
    if idle_rounds:
        result["idle_high"] = _idle(graph, capacity, seconds, min_fps, out, cores, idle_rounds, log)
    result["checks"] = checks(result)
    for c in result["checks"]:
        log(f"check {c['check']:<64} {c['value']:7.2f}  {'ok' if c['ok'] else 'MISSED'}")
    (out / "priorities.json").write_text(json.dumps(result, indent=2))
    chart(result, out / "priorities.png")
    return result


def _idle(graph: Any, capacity: float, seconds: float, min_fps: float, out: Path, cores: int | None,
          rounds_n: int, log: Any) -> dict[str, Any]:
    """The high-priority camera idle (it delivers one frame), the others offered 2x the capacity:
    the total rate with priorities and without, in ``rounds_n`` interleaved pairs."""
    fps = 2.0 * capacity / (CAMERAS - 1)
    frames = max(10, int(fps * seconds))
    sources = [_scene(1, 1)] + [_scene(fps, frames)] * (CAMERAS - 1)
    rounds: dict[str, list[float]] = {"priorities": [], "none": []}
    for k in range(rounds_n):  # interleaved, each pair in the other order than the last
        pair = [("priorities", _levels(min_fps)), ("none", None)]
        for mode, prio in (pair if k % 2 == 0 else pair[::-1]):
            rounds[mode].append(_run(graph, sources, out / f"idle-{mode}-{k}", True, prio, cores)["total_fps"])
    idle = {mode: float(np.median(fps_list)) for mode, fps_list in rounds.items()}
    ratio = float(np.median([a / max(b, 1e-9) for a, b in zip(rounds["priorities"], rounds["none"])]))
    log(f"camera 0 idle, the others at 2x: total {idle['priorities']:.1f} fps with priorities, "
        f"{idle['none']:.1f} without (median of {rounds_n} interleaved rounds: {rounds['priorities']} / "
        f"{rounds['none']}; median ratio of each round's pair {ratio:.2f}x)")
    return {**idle, "ratio": ratio, "rounds": rounds}


def checks(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks of a sweep: ``check`` (what and its bound), ``value``, ``ok``, and ``robust``:
    whether it holds on a busy shared machine too.  Those that do not compare a tail latency of
    about 10 ms or a rate of about 300 fps between two runs (on a fast 2-core machine) to a bound
    of 1.2 or 0.95, which the host's own noise moves across: on a 2-core AMD EPYC Zen 5 camera
    0's p99 ratio was 1.01-1.48 (median 1.28) in 12 sweeps of 3 rounds each of the same code."""
    loads = result["loads"]
    low, high = loads.get("0.5"), loads.get("1.5")
    out = []
    if low and high:
        p_low = low["priorities"]["cameras"][0]["p99_ms"]
        p_high = high["priorities"]["cameras"][0]["p99_ms"]
        out.append({"check": "camera0 p99 at 1.5x / p99 at 0.5x, with priorities <= 1.2",
                    "value": p_high / max(p_low, 1e-9), "ok": p_high <= 1.2 * p_low, "robust": False})
        out.append({"check": "camera0 frames dropped at 1.5x, with priorities, all rounds == 0",
                    "value": float(high["priorities"]["cameras"][0]["dropped"]),
                    "ok": high["priorities"]["cameras"][0]["dropped"] == 0, "robust": True})
        n_low = low["none"]["cameras"][0]["p99_ms"]
        n_high = high["none"]["cameras"][0]["p99_ms"]
        out.append({"check": "camera0 p99 at 1.5x / p99 at 0.5x, without priorities > 1.2",
                    "value": n_high / max(n_low, 1e-9), "ok": n_high > 1.2 * n_low, "robust": True})
        out.append({"check": f"camera0 p99 at 1.5x, with priorities / without <= {MECHANISM_SHARE}",
                    "value": p_high / max(n_high, 1e-9), "ok": p_high <= MECHANISM_SHARE * n_high, "robust": True})
    slowest = min(c["fps"] for row in loads.values() for c in row["priorities"]["cameras"][1:])
    out.append({"check": f"slowest normal camera fps >= min_fps {result['min_fps']}", "value": slowest,
                "ok": slowest >= result["min_fps"], "robust": True})
    if "idle_high" in result:
        ratio = result["idle_high"]["ratio"]
        out.append({"check": "camera0 idle: total fps with priorities / without >= 0.95", "value": ratio,
                    "ok": ratio >= 0.95, "robust": False})
    return out


def chart(result: dict[str, Any], path: Path) -> None:
    """Camera 0's p99 latency against offered load, with and without priorities (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    loads = sorted(result["loads"], key=float)
    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, style in (("priorities", "o-"), ("none", "s--")):
        ax.plot([float(x) for x in loads], [result["loads"][x][mode]["cameras"][0]["p99_ms"] for x in loads],
                style, label=f"camera 0 (high), {'with' if mode == 'priorities' else 'without'} priorities")
    ax.set_xlabel("offered load (x capacity)")
    ax.set_ylabel("p99 end-to-end latency (ms)")
    ax.set_title(f"{result['pipeline']}: 1 high + {CAMERAS - 1} normal cameras, capacity "
                 f"{result['capacity_fps']:.0f} fps")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", default="persons")
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each run")
    ap.add_argument("--min-fps", type=float, default=2.0)
    ap.add_argument("--cores", type=int, default=None)
    ap.add_argument("--out", default="bench-output/priorities")
    args = ap.parse_args(argv)
    from .clips import shared_dir

    if (shared_dir() / "models").is_dir():
        os.environ.setdefault("VAPIPE_MODELS_DIR", str(shared_dir() / "models"))
    result = run(args.pipeline, args.seconds, args.min_fps, Path(args.out), args.cores)
    return 0 if all(c["ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
