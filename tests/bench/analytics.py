"""Shared parts of the analytics benchmarks (detection intervals, motion gating).

Every measured run is a fresh ``vapipe run --json`` process with the metadata sink; FPS comes
from the run summary and the objects from its JSON Lines.  Accuracy compares a run with a reference run of the
same clip frame by frame: boxes matched one to one at IoU >= 0.5 (optimal assignment).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]
IOU = 0.5


@dataclass
class Run:
    """One pipeline run: its summary and, per frame (seq), the objects as (track_id, label, box)."""

    summary: dict[str, Any]
    frames: dict[int, list[tuple[int | None, str, list[float]]]] = field(default_factory=dict)

    @property
    def fps(self) -> float:
        return float(self.summary["total_fps"])

    def counters(self) -> dict[str, Any]:
        return self.summary["sources"][0]["counters"]


def run_vapipe(config: str, name: str, source: Path, sets: list[str] = (), max_frames: int | None = None) -> Run:
    """``vapipe run NAME`` of the pipeline file text ``config`` in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "pipelines.yaml"
        cfg.write_text(config)
        cmd = [sys.executable, "-m", "pipeline", "run", name, "--config", str(cfg), "--source",
               str(source), "--output", tmp, "--json", *(a for s in sets for a in ("--set", s))]
        if max_frames:
            cmd += ["--max-frames", str(max_frames)]
        env = dict(os.environ)
        env.setdefault("VAPIPE_MODELS_DIR", str(SHARED / "models"))
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(sets)} failed: {res.stderr.strip()[-800:]}")
        run = Run(json.loads(res.stdout))
        jsonl = next(Path(tmp).glob("*.jsonl"))
        for line in jsonl.read_text().splitlines():
            rec = json.loads(line)
            if "objects" in rec:
                run.frames[rec["seq"]] = [(o["track_id"], o["label"], o["box"]) for o in rec["objects"]]
    return run


def median_runs(config: str, modes: dict[str, list[str]], source: Path, rounds: int,
                max_frames: int | None = None, name: str = "bench") -> dict[str, tuple[float, Run]]:
    """Each mode (a list of --set) run ``rounds`` times, modes alternating; (median FPS, last run)."""
    fps: dict[str, list[float]] = {m: [] for m in modes}
    last: dict[str, Run] = {}
    for _ in range(rounds):
        for mode, sets in modes.items():
            last[mode] = run_vapipe(config, name, source, sets, max_frames)
            fps[mode].append(last[mode].fps)
    return {m: (statistics.median(fps[m]), last[m]) for m in modes}


def matched(ref: Run, got: Run, labels: set[str] | None = None) -> tuple[int, int]:
    """(reference boxes matched by ``got`` on the same frame, reference boxes)."""
    from stages.models.nms import iou_matrix
    from stages.tracking.assignment import match

    hit = total = 0
    for seq, objs in ref.frames.items():
        a = np.array([b for _, lab, b in objs if labels is None or lab in labels]).reshape(-1, 4)
        b = np.array([b for _, lab, b in got.frames.get(seq, []) if labels is None or lab in labels]).reshape(-1, 4)
        total += len(a)
        if len(a) and len(b):
            pairs, _, _ = match(1.0 - iou_matrix(a, b), 1.0 - IOU + 1e-9)
            hit += len(pairs)
    return hit, total


def id_switches(ref: Run, got: Run, labels: set[str] | None = None) -> int:
    """Identity switches of ``got``'s tracks against ``ref``'s tracks (motmetrics, IoU >= 0.5)."""
    import motmetrics as mm

    from tests.stages.tracking.mot import iou_distance

    acc = mm.MOTAccumulator(auto_id=False)
    for seq in sorted(ref.frames):
        r = [(t, b) for t, lab, b in ref.frames[seq] if t is not None and (labels is None or lab in labels)]
        g = [(t, b) for t, lab, b in got.frames.get(seq, []) if t is not None and (labels is None or lab in labels)]
        acc.update([t for t, _ in r], [t for t, _ in g],
                   iou_distance(np.array([b for _, b in r]).reshape(-1, 4), np.array([b for _, b in g]).reshape(-1, 4),
                                1.0 - IOU), frameid=seq)
    return int(mm.metrics.create().compute(acc, metrics=["num_switches"], name="x")["num_switches"].iloc[0])


def track_ids(run: Run, labels: set[str] | None = None) -> set[int]:
    return {t for objs in run.frames.values() for t, lab, _ in objs if t is not None and (labels is None or lab in labels)}


def objects_found(ref: Run, got: Run, labels: set[str] | None = None, share: float = 0.5) -> tuple[int, int]:
    """(reference tracks matched by ``got`` on at least ``share`` of their frames, reference tracks)."""
    from stages.models.nms import iou_matrix
    from stages.tracking.assignment import match

    seen: dict[int, int] = {}
    hits: dict[int, int] = {}
    for seq, objs in ref.frames.items():
        r = [(t, b) for t, lab, b in objs if t is not None and (labels is None or lab in labels)]
        g = np.array([b for _, lab, b in got.frames.get(seq, []) if labels is None or lab in labels]).reshape(-1, 4)
        for t, _ in r:
            seen[t] = seen.get(t, 0) + 1
        if r and len(g):
            pairs, _, _ = match(1.0 - iou_matrix(np.array([b for _, b in r]), g), 1.0 - IOU + 1e-9)
            for i in pairs[:, 0]:
                hits[r[i][0]] = hits.get(r[i][0], 0) + 1
    return sum(1 for t, n in seen.items() if hits.get(t, 0) >= share * n), len(seen)


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown CPU"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = fields.get("Flags", "")
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs, {simd}"


def pingpong_clip(name: str, width: int, height: int, frames: int) -> Path:
    """The shared clip ``name`` scaled to ``width`` x ``height`` H.264 (libx264, yuv420p, crf 23),
    played forwards, then backwards, and so on up to ``frames`` (motion stays continuous where a
    plain loop of a short clip jumps); cached next to the other benchmark clips.  Short clips only:
    their frames are held in memory."""
    import av

    from bench.clips import CACHE

    out_path = CACHE / f"{Path(name).stem}-{width}x{height}-{frames}-pingpong.mp4"
    if out_path.is_file():
        return out_path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".part.mp4")
    with av.open(str(SHARED / "data" / "videos" / name)) as src, av.open(str(tmp), "w") as dst:
        rate = Fraction(src.streams.video[0].average_rate or 10).limit_denominator(1000)
        stream = dst.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        forward = [f.reformat(width=width, height=height, format="yuv420p") for f in src.decode(video=0)]
        cycle = forward + forward[-2:0:-1]
        for n in range(frames):
            frame = cycle[n % len(cycle)]
            frame.pts, frame.time_base = n, 1 / rate
            dst.mux(stream.encode(frame))
        dst.mux(stream.encode(None))
    tmp.replace(out_path)
    return out_path
