"""samples/face_video.py: stages in the user's own loop, boxes or blurred faces in an MP4."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import av
import cv2
import numpy as np

from stages.detect import Detect
from stages.decode import Decode
from stages.encode import Encode
from tests.cli import ROOT, cli_env

SAMPLE = ROOT / "samples" / "face_video.py"
FACES = "head-pose-face-detection-female-and-male.gif"


def _run(models_dir: Path, *args: str | Path) -> tuple[int, int]:
    """Run the sample; (frames, faces) it reports."""
    proc = subprocess.run([sys.executable, str(SAMPLE), *map(str, args)], cwd=ROOT, env=cli_env(models_dir),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"^(\d+) frames, (\d+) faces -> ", proc.stdout, re.M)
    assert found, proc.stdout
    return int(found.group(1)), int(found.group(2))


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def _sharpness(image: np.ndarray, box: np.ndarray) -> float:
    x1, y1, x2, y2 = box.astype(int)
    gray = cv2.cvtColor(image[y1:y2, x1:x2], cv2.COLOR_BGR2GRAY)
    return float(cv2.Laplacian(gray, cv2.CV_64F).var())


def _outside(boxes: np.ndarray, shape: tuple[int, int], margin: int = 12) -> np.ndarray:
    """Mask of the pixels at least ``margin`` away from every box."""
    mask = np.ones(shape, bool)
    for x1, y1, x2, y2 in boxes.astype(int):
        mask[max(0, y1 - margin):y2 + margin, max(0, x1 - margin):x2 + margin] = False
    return mask


def _detail(image: np.ndarray, mask: np.ndarray) -> float:
    """Mean squared Laplacian over ``mask``."""
    lap = cv2.Laplacian(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), cv2.CV_64F)
    return float(np.mean(lap[mask] ** 2))


def test_every_frame_of_a_clip_without_faces_is_written(tmp_path: Path, clip: Path, models_dir: Path) -> None:
    out = tmp_path / "out.mp4"
    frames, faces = _run(models_dir, clip, out)
    written = _frames(out)
    source = _frames(clip)
    assert (frames, faces) == (len(source), 0)
    assert len(written) == len(source) and written[0].shape == source[0].shape


def test_blur_hides_the_faces_and_leaves_the_rest_as_sharp(tmp_path: Path, videos_dir: Path, models_dir: Path) -> None:
    clip = videos_dir / FACES
    frames, faces = _run(models_dir, clip, tmp_path / "blurred.mp4", "--blur")
    blurred = _frames(tmp_path / "blurred.mp4")
    assert len(blurred) == frames and faces >= 1.5 * frames  # two people, nearly always both found
    # the same frames through the same encoder, nothing drawn: what compression alone keeps
    with Decode(uri=str(clip)) as source, Encode(path=str(tmp_path / "plain.mp4"), annotate=False) as encoder:
        for frame in source.frames():
            encoder(frame)
    plain = _frames(tmp_path / "plain.mp4")
    checked = 0
    with Decode(uri=str(clip)) as source, \
            Detect(model="mediapipe/face_detection_short_range", decoder="blazeface") as detector:
        for frame in source.frames():
            frame = detector(frame)
            if frame.seq % 8 or not len(frame.detections):
                continue
            for box in frame.detections.xyxy:
                assert _sharpness(blurred[frame.seq], box) < 0.3 * _sharpness(plain[frame.seq], box), (frame.seq, box)
            rest = _outside(frame.detections.xyxy, blurred[frame.seq].shape[:2])
            assert _detail(blurred[frame.seq], rest) > 0.8 * _detail(plain[frame.seq], rest)
            checked += 1
    assert checked >= 5


def test_a_missing_input_is_one_line_naming_it(tmp_path: Path, models_dir: Path) -> None:
    missing = tmp_path / "nothing.mp4"
    proc = subprocess.run([sys.executable, str(SAMPLE), str(missing), str(tmp_path / "out.mp4")], cwd=ROOT,
                          env=cli_env(models_dir), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [f"face_video: error: source not found: {missing}"]
    assert not (tmp_path / "out.mp4").exists()
