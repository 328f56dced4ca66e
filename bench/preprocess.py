"""Cost of the ``preprocess`` stage on a 1080p H.264 clip.

Part 1, per frame, in this process (median over the frames; the operations take turns on
each frame, each on a fresh frame so no cache helps): the stage itself (making the view; masks), the detector input built from
the view (the 224x224 pose input; a 640x360 picture) next to the same input built from the
plain frame, and the naive way (convert the full frame to BGR, then crop, turn and
scale it with OpenCV).  Part 2: the ``persons`` pipeline with and without a preprocess
stage (crop 80 %, scale to 720 rows), in fresh processes, alternating rounds.

    python -m bench.preprocess [--frames 40] [--rounds 3] [--pipeline-frames 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import av
import cv2

from pipeline.frame import Frame
from stages.models.pose import PoseDetector
from stages.preprocess import Preprocess
from .clips import scaled_clip, shared_dir

ROOT = Path(__file__).resolve().parents[1]
VIEW = dict(crop=[0.1, 0.1, 0.9, 0.9], rotate=90, height=720)
MASKS = [[[100, 100], [500, 100], [500, 400], [100, 400]], [[1400, 600], [1800, 650], [1600, 1000]]]


def cpu_name() -> str:
    """The CPU model and its widest vector extension, e.g. "AMD EPYC, AVX2, no AVX-512"."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    vec = "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"
    return f"{model}, {vec}, {os.cpu_count()} cores"


def _interleaved(frames: list[av.VideoFrame], ops: list[tuple[str, Callable[[Frame], object], bool]],
                 repeats: int = 3) -> list[tuple[str, float]]:
    """Median milliseconds of each op, the ops taking turns on every frame (the machine's load
    then weighs on all of them alike).  Each op gets a fresh frame (no cache helps); with its
    flag set, the frame's BGR image is made beforehand, as the runtime does when a stage
    needs it."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in ops}
    for _ in range(repeats):
        for i, av_frame in enumerate(frames):
            for name, op, convert in ops if i % 2 else ops[::-1]:  # no op always runs first
                frame = Frame("bench", 0, av_frame.width, av_frame.height, av_frame=av_frame)
                if convert:
                    frame.image()
                t0 = time.perf_counter()
                op(frame)
                times[name].append((time.perf_counter() - t0) * 1000)
    return [(name, statistics.median(v)) for name, v in times.items()]


def _naive_view(frame: Frame) -> Frame:
    """What a user would do without the stage: the full BGR frame cropped, turned, scaled."""
    img = frame.image()
    h, w = img.shape[:2]
    img = cv2.rotate(img[int(0.1 * h):int(0.9 * h), int(0.1 * w):int(0.9 * w)], cv2.ROTATE_90_CLOCKWISE)
    img = cv2.resize(img, (round(img.shape[1] * 720 / img.shape[0]), 720), interpolation=cv2.INTER_LINEAR)
    return Frame.from_image(img)


def per_frame(frames: list[av.VideoFrame]) -> list[tuple[str, float]]:
    pose = PoseDetector()
    view, masks = Preprocess(**VIEW), Preprocess(**VIEW, masks=MASKS)

    def pose_input(frame: Frame) -> object:
        return pose.host_input(frame, (224, 224))

    return [("decode (reference)", _decode_ms())] + _interleaved(frames, [
        ("stage: crop + turn + scale (the view only)", view, False),
        ("stage: ... + 2 masks, from the planes", masks, False),
        ("stage: ... + 2 masks, frame already converted", masks, True),
        ("pose input 224x224, plain frame", pose_input, False),
        ("pose input 224x224, through the view", lambda f: pose_input(view(f)), False),
        ("pose input, naive (convert, crop, turn, scale)", lambda f: pose_input(_naive_view(f)), False),
        ("640x360 BGR, plain frame", lambda f: f.resized(640, 360), False),
        ("360x640 BGR, through the view (same pixel count)", lambda f: view(f).resized(360, 640), False),
        ("full-size BGR of the view (encode view: preprocessed)", lambda f: view(f).image(), False),
        ("full-size BGR of the plain frame", lambda f: f.image(), False),
    ])


def _decode_ms() -> float:
    clip = scaled_clip("one-by-one-person-detection.mp4", 400)
    with av.open(str(clip)) as c:
        t0 = time.perf_counter()
        n = sum(1 for _ in zip(range(100), c.decode(video=0)))
    return (time.perf_counter() - t0) * 1000 / n


PIPELINES = """pipelines:
  plain:
    stages:
      - {name: decode, type: decode}
      - {name: detect, type: detect, params: {model: mediapipe/pose_detection, decoder: pose}}
      - {name: metadata, type: metadata}
  preprocessed:
    stages:
      - {name: decode, type: decode}
      - {name: prep, type: preprocess, params: {crop: [0.1, 0.1, 0.9, 0.9], height: 720}}
      - {name: detect, type: detect, params: {model: mediapipe/pose_detection, decoder: pose}}
      - {name: metadata, type: metadata}
"""


def _vapipe_fps(config: Path, name: str, clip: Path, frames: int, out: Path) -> float:
    env = dict(os.environ)
    env.setdefault("VAPIPE_MODELS_DIR", str(shared_dir() / "models"))
    cmd = [sys.executable, "-m", "pipeline", "run", name, "--config", str(config), "--source", str(clip),
           "--output", str(out), "--max-frames", str(frames), "--json", "--no-progress"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"vapipe {name} failed: {res.stderr.strip()[-500:]}")
    return float(json.loads(res.stdout)["total_fps"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=40, help="decoded frames for the per-frame costs")
    ap.add_argument("--rounds", type=int, default=3, help="pipeline rounds; 0 skips the pipeline part")
    ap.add_argument("--pipeline-frames", type=int, default=300)
    args = ap.parse_args(argv)
    clip = scaled_clip("one-by-one-person-detection.mp4", 400)
    with av.open(str(clip)) as c:
        frames = [f for _, f in zip(range(args.frames), c.decode(video=0))]
    print(f"CPU: {cpu_name()}; {clip.name}, {frames[0].width}x{frames[0].height}, {len(frames)} frames")
    print(f"{'per frame (median)':<56} {'ms':>7}")
    for label, ms in per_frame(frames):
        print(f"{label:<56} {ms:>7.2f}")
    if args.rounds < 1:
        return 0
    fps: dict[str, list[float]] = {"plain": [], "preprocessed": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "pipelines.yaml"
        config.write_text(PIPELINES)
        _vapipe_fps(config, "plain", clip, 20, Path(tmp))  # warm the model cache
        for _ in range(args.rounds):
            for name in fps:
                fps[name].append(_vapipe_fps(config, name, clip, args.pipeline_frames, Path(tmp)))
    med = {k: statistics.median(v) for k, v in fps.items()}
    for name, values in fps.items():
        print(f"persons pipeline, {name:<13} {med[name]:7.1f} fps  (rounds: {', '.join(f'{v:.1f}' for v in values)})")
    print(f"preprocessed / plain: {med['preprocessed'] / med['plain']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
