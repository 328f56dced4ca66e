"""Runs a benchmark: every mode in a fresh process, modes interleaved over rounds,
the median of every number reported; writes ``bench.json`` and the charts.

A fresh process per run means no model cache in memory, thread pool or GIL setting
leaks from one mode into the next; alternating the order of the modes from round to
round spreads the machine's slow moments (it is shared and noisy) over all of them.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from .plan import BASE_MODES, ENGINE_MODES, BenchError, BenchPlan, sweep_mode, sweep_requests

__all__ = ["spawn_worker", "run_bench", "summarise", "frames_for_run", "ROOT", "MAX_STRETCH"]

ROOT = Path(__file__).resolve().parents[1]
WARMUP_FRAMES = 10
#: :func:`frames_for_run` lengthens a run at most this many times
MAX_STRETCH = 8


def spawn_worker(mode: str, plan: BenchPlan, python: str | Path | None = None,
                 timeout: float = 1800.0) -> dict[str, Any]:
    """Run one mode in a fresh interpreter and return its result (the last line of its
    stdout) with ``seconds``, the process's wall time.  ``python``: the peers' interpreter
    for a peer mode (run as :mod:`bench.peers.worker`), else this one (:mod:`bench.worker`)."""
    from .peers.registry import PEERS

    if mode in PEERS:
        cmd = [str(python), "-m", "bench.peers.worker", "--peer", mode]
    else:
        cmd = [sys.executable, "-m", "bench.worker", "--mode", mode]
    cmd += ["--plan", json.dumps(asdict(plan))]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"bench mode {mode!r} did not finish within {timeout:.0f} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise BenchError(f"bench mode {mode!r} failed: {err[-1] if err else f'exit {proc.returncode}'}")
    res = json.loads(lines[-1])
    res["seconds"] = round(time.monotonic() - t0, 2)
    return res


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over rounds of every number a mode reports (per camera, per model too)."""
    out: dict[str, Any] = {"fps": round(_median([r["fps"] for r in runs]), 2), "rounds": [r["fps"] for r in runs]}
    ncam = len(runs[0].get("cameras", []))
    if ncam:
        out["fps_per_camera"] = [round(_median([r["cameras"][i]["fps"] for r in runs]), 2) for i in range(ncam)]
        out["frames_per_camera"] = [runs[-1]["cameras"][i]["frames"] for i in range(ncam)]
    for key in ("latency_p50_ms", "latency_p95_ms", "cpu_util", "detect_fps", "seconds"):
        vals = [r[key] for r in runs if r.get(key) is not None]
        if vals:
            out[key] = round(_median(vals), 3)
    for key in ("region_fps", "objects_per_frame", "work_ms"):  # {stage or kind: value}
        first = next((r[key] for r in runs if r.get(key)), None)
        if first:
            out[key] = {k: round(_median([r[key][k] for r in runs if k in (r.get(key) or {})]), 3) for k in first}
    for key in ("requests", "stages", "threads", "plan_check", "models_sha256", "version", "max_faces"):
        if key in runs[-1]:
            out[key] = runs[-1][key]
    return out


def frames_for_run(name: str, source: str, cameras: int, frames: int, min_run_s: float,
                   config: str | Path = "pipelines.yaml", sets: Sequence[str] = ()) -> tuple[int, float]:
    """Frames per camera for runs of vapipe on ``source`` lasting at least ``min_run_s`` on this
    machine (at most ``MAX_STRETCH`` times ``frames``, never fewer), and the seconds a run of
    ``frames`` took.  One vapipe run of ``frames`` measures the rate: on a fast CPU a fixed frame
    count lasts half a second, and start-up and the drain at the end then weigh on every mode
    differently (persons on 4 cameras of a 1080p clip, 2-core AMD EPYC Zen 5: vapipe at 0.93x
    the runtimes' defaults in runs of 1 s, 1.00x in runs of 6 s)."""
    from pipeline.videofile import count_frames

    total, width, height = count_frames(source)
    plan = BenchPlan(pipeline=name, config=str(Path(config).resolve()), source=str(Path(source).resolve()),
                     cameras=cameras, frames=frames, width=width, height=height, loop=frames > total,
                     out=str(Path(os.environ.get("TMPDIR", "/tmp")) / "vapipe-bench-probe"), record_frames=2,
                     sets=list(sets))
    res = spawn_worker("vapipe", plan)
    run_s = cameras * frames / max(float(res["fps"]), 1e-9)
    if run_s >= min_run_s:
        return frames, run_s
    return min(frames * MAX_STRETCH, math.ceil(frames * min_run_s / run_s)), run_s


def _check_arguments(source: str, cameras: int, rounds: int, frames: int | None, modes: Sequence[str],
                     sweep: Sequence[int]) -> None:
    from .peers.registry import PEERS

    if cameras < 1:
        raise ValueError(f"--cameras must be >= 1, got {cameras}")
    if rounds < 1:
        raise ValueError(f"--rounds must be >= 1, got {rounds}")
    if frames is not None and frames < 2:
        raise ValueError(f"--frames must be >= 2, got {frames}")
    valid = (*BASE_MODES, *ENGINE_MODES, *PEERS)
    bad = [m for m in modes if m not in valid and sweep_requests(m) is None]
    if bad:
        raise ValueError(f"unknown bench mode {bad[0]!r}; valid: {', '.join(valid)}, vapipe-rN")
    if any(n < 1 for n in sweep):
        raise ValueError(f"--requests-sweep values must be >= 1, got {', '.join(map(str, sweep))}")
    if "://" in source or not Path(source).is_file():
        raise ValueError(f"bench needs a video file as --source (the naive loop reads it with cv2.VideoCapture); "
                         f"not a file: {source}")


def run_bench(name: str, source: str, cameras: int = 1, frames: int | None = None, out: str | Path = "bench-output",
              rounds: int = 3, config: str | Path = "pipelines.yaml", modes: Sequence[str] | None = None,
              sets: Sequence[str] = (), requests_sweep: Sequence[int] = (), peers: bool = True,
              peer_python: str | None = None, truth: str | Path | None = None, record_frames: int = 1000,
              base_modes: Sequence[str] = BASE_MODES, engine: str = "openvino",
              log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every mode ``rounds`` times; write ``bench.json`` and ``bench.png`` into ``out``.

    ``modes``: base modes and peers to run (default: ``base_modes``, and every peer that
    fits the pipeline and is installed when ``peers``); ``requests_sweep``: also run vapipe
    with each of these request counts (``vapipe-rN``); ``engine``: also run vapipe with every
    inference stage on this engine (``onnxruntime``: ``vapipe-ort``, refused in one line when a
    model is not .onnx); ``truth``: ground-truth text lines of the source
    (:func:`bench.clips.ticker_clip`) for the reading accuracy of every mode."""
    from pipeline.config import load_pipeline
    from pipeline.videofile import count_frames

    from . import agreement, report, targets
    from .chain import load_chain, load_spec
    from .engine_modes import check_models, engine_mode
    from .peers import registry

    say = log or (lambda msg: None)
    extra = engine_mode(engine)
    _check_arguments(source, cameras, rounds, frames, [*(modes or ()), *base_modes], requests_sweep)
    config = str(Path(config).resolve())
    load_pipeline(config, name, check_files=False)  # a missing pipeline or a bad file: one line
    total, width, height = count_frames(source)
    frames = frames or total
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = BenchPlan(pipeline=name, config=config, source=str(Path(source).resolve()), cameras=cameras,
                     frames=frames, width=width, height=height, loop=frames > total, out=str(out.resolve()),
                     record_frames=min(record_frames, frames), sets=list(sets))
    chain = load_chain(load_spec(plan))   # fails early, in one line, when the pipeline has no baseline
    fitting = registry.peers_for(chain)
    python = registry.peer_python(peer_python)
    chosen = list(modes) if modes else list(base_modes) + ([p.name for p in fitting] if peers else [])
    if extra and extra not in chosen:   # next to vapipe, its reference
        chosen.insert(chosen.index("vapipe") + 1 if "vapipe" in chosen else len(chosen), extra)
    chosen += [sweep_mode(n) for n in requests_sweep if sweep_mode(n) not in chosen]
    for mode in [m for m in chosen if m in ENGINE_MODES]:
        check_models(mode, [chain.detect, *chain.regions])
    skipped: dict[str, str] = {}
    for mode in [m for m in chosen if m in registry.PEERS]:
        peer = registry.PEERS[mode]
        reason = (f"pipeline {name!r} is not {peer.detector} + {' + '.join(peer.regions)}" if peer not in fitting
                  else registry.unavailable_reason(str(python) if python else None, peer.module))
        if reason and modes:   # asked for by name: an error, not a silent skip
            raise ValueError(f"bench mode {mode!r} cannot run: {reason}")
        if reason:
            skipped[mode] = reason
            chosen.remove(mode)
    say(f"bench {name}: {Path(source).name} {width}x{height}, {cameras} camera(s) x {frames} frames, "
        f"{rounds} round(s), modes: {', '.join(chosen)}"
        + "".join(f"\n  {p} not run: {why}" for p, why in skipped.items()))
    warmup = replace(plan, frames=min(frames, WARMUP_FRAMES), cameras=1, out=str(out / "warmup"),
                     record_frames=WARMUP_FRAMES)
    warm = spawn_worker("vapipe", warmup)
    plan = replace(plan, precision=warm.get("precision", {}))   # what vapipe's plan chose, for the baselines
    if plan.precision:
        say("  " + ", ".join(f"{s} at {p}" for s, p in plan.precision.items()) + " in every mode but "
            "vapipe-unplanned: vapipe's plan measured it no slower than the runtime's default precision")
    objects = agreement.max_objects(out / "warmup" / "records" / "vapipe.json")
    for mode in [m for m in chosen if m in ENGINE_MODES]:   # its engine's model costs measured before round 1
        spawn_worker(mode, warmup)
    settings = {p: registry.peer_settings(registry.PEERS[p], chain, objects) for p in chosen if p in registry.PEERS}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in chosen}
    t_start = time.monotonic()
    for r in range(rounds):
        order = chosen if r % 2 == 0 else list(reversed(chosen))
        for mode in order:
            res = spawn_worker(mode, replace(plan, peer=settings.get(mode, {})), python)
            runs[mode].append(res)
            say(f"  round {r + 1}/{rounds}  {mode:<17} {res['fps']:8.1f} fps  ({res['seconds']:.1f} s, "
                f"{time.monotonic() - t_start:.0f} s so far)")
    result: dict[str, Any] = {
        "pipeline": name, "source": plan.source, "width": width, "height": height, "source_frames": total,
        "cameras": cameras, "frames": frames, "rounds": rounds, "cores": os.cpu_count(), "sets": list(sets),
        "engine": engine, "precision": plan.precision,
        "warmup_seconds": warm["seconds"], "seconds": round(time.monotonic() - t_start, 1),
        "modes": {m: summarise(v) for m, v in runs.items()},
        "peers": {p: {"description": registry.PEERS[p].description, "target": registry.PEERS[p].target,
                      "same_models": sorted(settings[p]["sha256"].values()) ==
                      runs[p][-1].get("models_sha256")} for p in settings},
        "peers_skipped": skipped,
    }
    result.update(agreement.evaluate(out / "records", chosen, truth))
    result.update(targets.evaluate(result))
    result["chart"] = report.write_chart(result, out / "bench.png")
    (out / "bench.json").write_text(json.dumps(result, indent=2))
    return result
