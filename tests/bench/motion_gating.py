"""Motion gating on the static-camera clips: detection only on frames with motion (and a refresh
every ``refresh_s``), the tracker carrying objects through the others.

Per clip, ungated (detect every frame, track) against gated (motion, detect, track), JSON Lines
out, in alternating rounds: the share of frames the detector ran on, FPS of both, and against the
ungated run: its boxes found by the gated run at IoU >= 0.5 (recall), and its tracked objects
found on at least half of their frames.  Detectors: the pose detector for people, YOLO11n
(shared folder, INT8, score >= 0.4, every label) for bottles and cars.

    python -m tests.bench.motion_gating [--rounds 3] [--set motion.alpha=0.05 ...]
"""

from __future__ import annotations

import argparse

from tests.bench.analytics import Run, cpu_name, matched, median_runs, objects_found
from tests.conftest import SHARED

VIDEOS = SHARED / "data" / "videos"
YOLO = SHARED / "models" / "yolo" / "yolo11n_int8_openvino_model"
PERSONS = "{model: mediapipe/pose_detection, decoder: pose}"
# resize: host: the same input path in every run (auto would choose per run by timing)
OBJECTS = f"{{model: {YOLO}, threshold: 0.4, resize: host}}"
CLIPS = {"one-by-one-person-detection.mp4": PERSONS, "bottle-detection.mp4": OBJECTS, "car-detection.mp4": OBJECTS}


def pipelines(detector: str) -> str:
    return f"""
pipelines:
  ungated:
    stages:
      - {{name: decode, type: decode}}
      - {{name: detect, type: detect, params: {detector}}}
      - {{name: track, type: track}}
      - {{name: metadata, type: metadata}}
  gated:
    stages:
      - {{name: decode, type: decode}}
      - {{name: motion, type: motion}}
      - {{name: detect, type: detect, params: {detector}}}
      - {{name: track, type: track}}
      - {{name: metadata, type: metadata}}
"""


def measure(clip: str, rounds: int, sets: list[str] = ()) -> dict[str, float]:
    """Ungated and gated runs of one clip (modes alternate over rounds; median FPS)."""
    config = pipelines(CLIPS[clip])
    fps: dict[str, list[float]] = {"ungated": [], "gated": []}
    runs: dict[str, Run] = {}
    for _ in range(rounds):
        for mode in fps:
            got = median_runs(config, {mode: list(sets) if mode == "gated" else []}, VIDEOS / clip, 1, name=mode)
            fps[mode].append(got[mode][0])
            runs[mode] = got[mode][1]
    ref, gated = runs["ungated"], runs["gated"]
    detect = gated.counters()["detect"]
    hit, total = matched(ref, gated)
    ref_tracked = Run(ref.summary, {s: [o for o in objs if o[0] is not None] for s, objs in ref.frames.items()})
    hit_tracked, total_tracked = matched(ref_tracked, gated)
    found, objects = objects_found(ref, gated)
    f_ungated, f_gated = sorted(fps["ungated"])[rounds // 2], sorted(fps["gated"])[rounds // 2]
    return {"frames": detect["frames_inferred"] + detect["frames_passed"],
            "detected": detect["frames_inferred"] / max(1, detect["frames_inferred"] + detect["frames_passed"]),
            "fps_ungated": f_ungated, "fps_gated": f_gated, "speedup": f_gated / f_ungated,
            "box_recall": hit / max(total, 1), "boxes": total, "tracked_recall": hit_tracked / max(total_tracked, 1),
            "objects_found": found, "objects": objects}


def format_row(clip: str, r: dict[str, float]) -> str:
    return (f"{clip:<34} {r['frames']:>6} {100 * r['detected']:>8.1f}% {r['fps_ungated']:>11.1f} {r['fps_gated']:>8.1f} "
            f"{r['speedup']:>6.2f} {100 * r['box_recall']:>9.1f}% {100 * r['tracked_recall']:>10.1f}% "
            f"{r['objects_found']:>6}/{r['objects']:<4}")


#: box recall: all boxes of the ungated run; of tracked: its boxes that carry a track id
HEADER = (f"{'clip':<34} {'frames':>6} {'detected':>9} {'fps ungated':>11} {'gated':>8} {'x':>6} {'box recall':>10} "
          f"{'of tracked':>11} {'objects found':>13}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="STAGE.PARAM=VALUE", help="for the gated runs")
    ap.add_argument("--clips", default=",".join(CLIPS))
    args = ap.parse_args(argv)
    print(f"CPU: {cpu_name()}; median FPS of {args.rounds} alternating rounds")
    print(HEADER)
    for clip in args.clips.split(","):
        print(format_row(clip, measure(clip, args.rounds, args.set)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
