"""Reference face detections from MediaPipe's own face detection solution.

Run with an interpreter that has ``mediapipe`` (0.10.x) and PyAV installed;
mediapipe is not a vapipe dependency, the JSON it writes is what the
agreement tests compare against::

    python tests/reference/make_mediapipe_faces.py VIDEO OUT.json

Frames are decoded with PyAV and converted to BGR exactly as vapipe's decode
path does (``frame.to_ndarray(format="bgr24")``), then handed to MediaPipe as
RGB.  Each frame records an MD5 of its BGR pixels so a test can check that it
sees the same frames.  Output (source pixels, rounded to 2 decimals)::

    {"clip": ..., "width": W, "height": H, "model_selection": 0,
     "min_detection_confidence": 0.5,
     "frames": [{"md5": "...", "faces": [{"box": [x1, y1, x2, y2], "score": s,
                                          "keypoints": [[x, y] * 6]}]}]}
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

import av
import cv2
import numpy as np


def decode_bgr(path: Path) -> Iterator[np.ndarray]:
    """Every frame of the first video stream as BGR uint8 (H, W, 3)."""
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="bgr24")


def _r(v: float) -> float:
    return round(float(v), 2)


def detect_faces(path: Path, model_selection: int = 0, min_conf: float = 0.5) -> dict[str, Any]:
    import mediapipe as mp

    frames: list[dict[str, Any]] = []
    width = height = 0
    with mp.solutions.face_detection.FaceDetection(model_selection=model_selection,
                                                   min_detection_confidence=min_conf) as fd:
        for bgr in decode_bgr(path):
            height, width = bgr.shape[:2]
            res = fd.process(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            faces = []
            for det in res.detections or []:
                loc = det.location_data
                bb = loc.relative_bounding_box
                x1, y1 = bb.xmin * width, bb.ymin * height
                faces.append({
                    "box": [_r(x1), _r(y1), _r(x1 + bb.width * width), _r(y1 + bb.height * height)],
                    "score": round(float(det.score[0]), 4),
                    "keypoints": [[_r(k.x * width), _r(k.y * height)] for k in loc.relative_keypoints],
                })
            frames.append({"md5": hashlib.md5(bgr.tobytes()).hexdigest(), "faces": faces})
    return {"clip": path.name, "width": width, "height": height, "model_selection": model_selection,
            "min_detection_confidence": min_conf, "frames": frames}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("video", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--model-selection", type=int, default=0)
    ap.add_argument("--min-conf", type=float, default=0.5)
    args = ap.parse_args()
    ref = detect_faces(args.video, args.model_selection, args.min_conf)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(ref, separators=(",", ":")) + "\n")
    n = sum(len(f["faces"]) for f in ref["frames"])
    print(f"{args.video.name}: {len(ref['frames'])} frames, {n} faces -> {args.out}")


if __name__ == "__main__":
    main()
