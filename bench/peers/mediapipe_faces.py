"""MediaPipe's own FaceMesh loop: ``solutions.face_mesh.FaceMesh`` in video mode with
``max_num_faces`` = the number of faces in the clip and ``refine_landmarks=False`` (so it
runs BlazeFace short-range and ``face_landmark.tflite``, the models of vapipe's ``faces``).

In video mode MediaPipe runs the detector only while it tracks fewer faces than it
may, and otherwise crops each face where the previous frame's landmarks put it: that
is MediaPipe's design and part of what this peer measures.  A face is recorded as the
bounding box of its 468 landmarks (source pixels) and, for the first frames, the
landmarks themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import LANDMARK_FRAMES, object_record
from bench.plan import BenchPlan

from .worker import run_loop

__all__ = ["run", "model_files", "version"]


def version() -> str:
    import mediapipe

    return f"mediapipe {mediapipe.__version__}"


def model_files(plan: BenchPlan) -> list[str]:
    """The two model files FaceMesh loads (inside the mediapipe package)."""
    import mediapipe

    modules = Path(mediapipe.__file__).parent / "modules"
    return [str(modules / "face_detection" / "face_detection_short_range.tflite"),
            str(modules / "face_landmark" / "face_landmark.tflite")]


def run(plan: BenchPlan) -> dict[str, Any]:
    import mediapipe as mp

    faces = int(plan.peer.get("max_faces", 1))

    def make_model() -> Any:
        return mp.solutions.face_mesh.FaceMesh(static_image_mode=False, max_num_faces=faces,
                                               refine_landmarks=False)

    def process(mesh: Any, rgb: np.ndarray, seq: int) -> list[dict[str, Any]]:
        found = mesh.process(rgb).multi_face_landmarks or []
        h, w = rgb.shape[:2]
        objects = []
        for face in found:
            pts = np.array([(p.x * w, p.y * h) for p in face.landmark], np.float32)
            box = (*pts.min(axis=0), *pts.max(axis=0))
            objects.append(object_record(box, None, "face", pts if seq < LANDMARK_FRAMES else None))
        return objects

    res = run_loop(plan, make_model, process, "rgb24")
    res["max_faces"] = faces
    return res
