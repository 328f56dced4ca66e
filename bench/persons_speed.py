"""Side-by-side speed of the ``persons`` pipeline on a 1080p H.264 clip.

Runs, in one invocation and alternating rounds (the machine is shared and
noisy): vapipe async, ``--sync``, both with ``--capture-delay-ms 10``, and a
naive ``cv2.VideoCapture`` + synchronous ``infer`` loop on the same model.
Prints FPS per mode (median of rounds) and the ratios the design promises.

    python -m bench.persons_speed [--frames 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .clips import scaled_clip, shared_dir
from .plan import BenchPlan
from .runner import ROOT, spawn_worker


def _vapipe(clip: Path, extra: list[str], out: Path) -> float:
    cmd = [sys.executable, "-m", "pipeline", "run", "persons", "--source", str(clip), "--output", str(out),
           "--json", *extra]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"vapipe failed ({' '.join(extra)}): {res.stderr.strip()[-500:]}")
    return float(json.loads(res.stdout)["total_fps"])


def _naive(clip: Path, frames: int, out: Path) -> float:
    """The bench's naive mode (cv2.VideoCapture, host preprocessing, synchronous infer)."""
    from pipeline.videofile import count_frames

    _, width, height = count_frames(str(clip))
    plan = BenchPlan(pipeline="persons", config=str(ROOT / "pipelines.yaml"), source=str(clip), frames=frames,
                     width=width, height=height, out=str(out), record_frames=0)
    return float(spawn_worker("naive", plan)["fps"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ.setdefault("VAPIPE_MODELS_DIR", str(shared_dir() / "models"))
    clip = scaled_clip("one-by-one-person-detection.mp4", args.frames)
    modes = {
        "async": ["--no-progress"],
        "sync": ["--no-progress", "--sync"],
        "async+delay10": ["--no-progress", "--capture-delay-ms", "10"],
        "sync+delay10": ["--no-progress", "--sync", "--capture-delay-ms", "10"],
    }
    fps: dict[str, list[float]] = {m: [] for m in [*modes, "naive"]}
    with tempfile.TemporaryDirectory() as tmp:
        _vapipe(clip, ["--no-progress", "--max-frames", "20"], Path(tmp))  # warm the model cache
        for r in range(args.rounds):
            for mode, extra in modes.items():
                fps[mode].append(_vapipe(clip, extra, Path(tmp)))
            fps["naive"].append(_naive(clip, args.frames, Path(tmp)))
            print(f"round {r + 1}: " + ", ".join(f"{m} {v[-1]:.1f}" for m, v in fps.items()), file=sys.stderr)
    med = {m: statistics.median(v) for m, v in fps.items()}
    print(f"persons pipeline, {clip.name}, {args.frames} frames, {os.cpu_count()} cores, "
          f"median of {args.rounds} rounds")
    print(f"{'mode':<16} {'fps':>8}   rounds")
    for m, v in fps.items():
        print(f"{m:<16} {med[m]:>8.1f}   {', '.join(f'{x:.1f}' for x in v)}")
    checks = [
        ("async / sync", med["async"] / med["sync"], 1.05),
        ("async / sync, capture delay 10 ms", med["async+delay10"] / med["sync+delay10"], 1.6),
        ("async / naive cv2 loop", med["async"] / med["naive"], 1.15),
    ]
    ok = True
    for label, ratio, target in checks:
        flag = "ok" if ratio >= target else "BELOW TARGET"
        ok &= ratio >= target
        print(f"{label:<36} {ratio:5.2f}x  (target >= {target:.2f}x) {flag}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
