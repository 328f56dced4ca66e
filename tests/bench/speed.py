"""``make bench``: ``vapipe bench`` on 1080p H.264 clips made from the shared clips.

Runs, one after the other: ``persons`` with 1 camera, ``persons`` with 4 cameras,
``faces`` with 1 camera (the head-pose GIF upscaled to 1080p and looped to
``--frames``) and ``faces`` on the GIF itself (480x270, where the two models, not
the decoder, take most of the CPU: the thread plan's case).  Each prints its table
(naive, hand-tuned, vapipe, vapipe --sync, vapipe without the thread plan, decode
alone, inference alone, limit, ratios and targets) and writes ``bench.json`` and
``bench.png`` into ``OUT/<run>/``.

    python -m tests.bench.speed [--frames 400] [--rounds 5] [--out bench-output] [--only persons-1,...]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tests.bench.clips import clip_1080p
from tests.conftest import SHARED

RUNS = {  # name -> (pipeline, shared video, cameras, made into a 1080p H.264 clip)
    "persons-1": ("persons", "one-by-one-person-detection.mp4", 1, True),
    "persons-4": ("persons", "one-by-one-person-detection.mp4", 4, True),
    "faces-1": ("faces", "head-pose-face-detection-female-and-male.gif", 1, True),
    "faces-gif": ("faces", "head-pose-face-detection-female-and-male.gif", 1, False),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=400, help="frames per camera (and length of the clips)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per mode; the median is reported")
    ap.add_argument("--out", default="bench-output")
    ap.add_argument("--only", default=",".join(RUNS), help=f"comma-separated subset of {', '.join(RUNS)}")
    args = ap.parse_args(argv)
    os.environ.setdefault("VAPIPE_MODELS_DIR", str(SHARED / "models"))
    from pipeline.cli import main as vapipe

    status = 0
    for key in args.only.split(","):
        pipeline, video, cameras, upscaled = RUNS[key.strip()]
        clip = clip_1080p(args.frames, video) if upscaled else SHARED / "data" / "videos" / video
        print(f"\n== vapipe bench {pipeline} --cameras {cameras} ({clip.name})", flush=True)
        status |= vapipe(["bench", pipeline, "--source", str(clip), "--cameras", str(cameras), "--frames",
                          str(args.frames), "--rounds", str(args.rounds), "--out", str(Path(args.out) / key)])
    return status


if __name__ == "__main__":
    sys.exit(main())
