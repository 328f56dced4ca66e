"""Detection every N frames with the tracker carrying objects in between: FPS, boxes and ids.

For N = 1, 2, 3, 5, 10 on the two-face head-pose clip re-encoded at 720p and 1080p, played
forwards and backwards in turn to 280 frames (a plain loop makes the faces jump) (``faces``:
BlazeFace every N frames, ``track``, face mesh with ``reclassify: N``) and on the people clip
(``persons``: pose detector every N frames, ``track``); JSON Lines out.  Against N = 1 of the
same clip: the share of its boxes matched at IoU >= 0.5, the ids, and identity switches.

    python -m tests.bench.intervals [--rounds 3] [--intervals 1,2,3,5,10]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.bench.analytics import Run, cpu_name, id_switches, matched, median_runs, pingpong_clip, track_ids
from tests.conftest import SHARED

FACES_CLIP = "head-pose-face-detection-female-and-male.gif"
PEOPLE_CLIP = "one-by-one-person-detection.mp4"
PIPELINES = """
pipelines:
  faces:
    stages:
      - {name: decode, type: decode}
      - {name: face_detect, type: detect, params: {model: mediapipe/face_detection_short_range, decoder: blazeface}}
      - {name: track, type: track}
      - {name: landmarks, type: classify, params: {model: mediapipe/face_landmark, decoder: face_landmarks,
                                                   on: [face]}}
      - {name: metadata, type: metadata}
  persons:
    stages:
      - {name: decode, type: decode}
      - {name: person_detect, type: detect, params: {model: mediapipe/pose_detection, decoder: pose}}
      # min_hits 4: a person stepping in close gets a head-sized box for 2-3 frames first (see
      # tests/stages/test_track_video.py), which would otherwise become a track of its own
      - {name: track, type: track, params: {min_hits: 4}}
      - {name: metadata, type: metadata}
"""


def cases(frames: int = 280, people_frames: int = 600) -> list[tuple[str, str, Path, str, int | None]]:
    """(case name, pipeline, clip, detect stage, max frames)."""
    return [("faces 720p", "faces", pingpong_clip(FACES_CLIP, 1280, 720, frames), "face_detect", None),
            ("faces 1080p", "faces", pingpong_clip(FACES_CLIP, 1920, 1080, frames), "face_detect", None),
            ("persons 768x432", "persons", SHARED / "data" / "videos" / PEOPLE_CLIP, "person_detect", people_frames)]


def curve(pipeline: str, clip: Path, detect: str, intervals: list[int], rounds: int,
          max_frames: int | None = None) -> list[dict[str, float]]:
    """One row per interval: fps, speedup, matched share, ids, id switches (N = 1 is the reference)."""
    modes = {}
    for n in intervals:
        sets = [f"{detect}.every={n}"] + ([f"landmarks.reclassify={n}"] if pipeline == "faces" else [])
        modes[str(n)] = sets
    runs = median_runs(PIPELINES, modes, clip, rounds, max_frames, name=pipeline)
    base_fps, ref = runs[str(intervals[0])]
    ref_tracked = Run(ref.summary, {s: [o for o in objs if o[0] is not None] for s, objs in ref.frames.items()})
    rows = []
    for n in intervals:
        fps, run = runs[str(n)]
        hit, total = matched(ref, run)
        hit_tracked, total_tracked = matched(ref_tracked, run)
        rows.append({"every": n, "fps": fps, "speedup": fps / base_fps, "matched": hit / max(total, 1),
                     "boxes": total, "matched_tracked": hit_tracked / max(total_tracked, 1),
                     "ids": len(track_ids(run)), "id_switches": id_switches(ref, run)})
    return rows


def format_rows(name: str, rows: list[dict[str, float]]) -> str:
    """``matched``: share of the N = 1 run's boxes found at IoU >= 0.5; ``of tracked``: the same for
    its boxes that carry a track id (objects, not single-frame detections)."""
    lines = [f"{name}", f"  {'N':>3} {'fps':>8} {'x N=1':>7} {'matched':>9} {'of tracked':>11} {'ids':>4} {'id sw':>6}"]
    for r in rows:
        lines.append(f"  {r['every']:>3} {r['fps']:>8.1f} {r['speedup']:>7.2f} {100 * r['matched']:>8.1f}% "
                     f"{100 * r['matched_tracked']:>10.1f}% {r['ids']:>4} {r['id_switches']:>6}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--intervals", default="1,2,3,5,10")
    args = ap.parse_args(argv)
    intervals = [int(x) for x in args.intervals.split(",")]
    print(f"CPU: {cpu_name()}; median FPS of {args.rounds} alternating rounds")
    for name, pipeline, clip, detect, max_frames in cases():
        print(format_rows(f"{name} ({clip.name})", curve(pipeline, clip, detect, intervals, args.rounds, max_frames)),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
