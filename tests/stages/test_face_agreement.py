"""vapipe's face detector against MediaPipe's own face detection solution.

References (``tests/data/mediapipe_faces_*.json``) were written by
``tests/reference/make_mediapipe_faces.py`` (mediapipe 0.10.14,
model_selection=0, min_detection_confidence=0.5) from the same PyAV-decoded
frames; each frame carries an MD5 of its BGR pixels, checked here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.engine import get_engine
from pipeline.frame import Frame
from pipeline.models import resolve_model
from pipeline.config import load_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from stages.models.blazeface import BlazeFace
from stages.models.nms import iou_matrix

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CLIPS = {
    "head_pose": "head-pose-face-detection-female-and-male.gif",
    "demographics_walking": "face-demographics-walking.gif",
    "book": "book.mkv",
}
MODEL = "mediapipe/face_detection_short_range"


@dataclass
class Agreement:
    reference: int        # MediaPipe faces
    matched: int          # ... with a vapipe face at IoU >= 0.85
    extra: int            # vapipe faces without a MediaPipe face at IoU >= 0.5
    ious: np.ndarray      # best IoU per MediaPipe face

    def __str__(self) -> str:
        mean = float(self.ious.mean()) if len(self.ious) else float("nan")
        return (f"{self.matched}/{self.reference} matched at IoU>=0.85, {self.extra} extra, "
                f"mean IoU {mean:.4f}, min {self.ious.min() if len(self.ious) else float('nan'):.3f}")


def agreement(reference: list[dict], found: list[np.ndarray]) -> Agreement:
    ious: list[float] = []
    extra = 0
    for ref, got in zip(reference, found, strict=True):
        rb = np.array([f["box"] for f in ref["faces"]], np.float32).reshape(-1, 4)
        gb = np.asarray(got, np.float32).reshape(-1, 4)
        m = iou_matrix(rb, gb) if len(rb) and len(gb) else np.zeros((len(rb), len(gb)))
        ious.extend(m.max(1) if len(gb) else np.zeros(len(rb)))
        extra += int((m.max(0) < 0.5).sum()) if len(rb) else len(gb)
    arr = np.asarray(ious, np.float64)
    return Agreement(reference=len(arr), matched=int((arr >= 0.85).sum()), extra=extra, ious=arr)


def load_clip(videos_dir: Path, name: str) -> tuple[list[dict], list[np.ndarray]]:
    ref = json.loads((DATA / f"mediapipe_faces_{name}.json").read_text())
    with av.open(str(videos_dir / CLIPS[name])) as c:
        frames = [f.to_ndarray(format="bgr24") for f in c.decode(video=0)]
    assert len(frames) == len(ref["frames"])
    for i, (bgr, r) in enumerate(zip(frames, ref["frames"])):
        assert hashlib.md5(bgr.tobytes()).hexdigest() == r["md5"], f"frame {i} differs from the reference's"
    return ref["frames"], frames


def check(a: Agreement, min_mean_iou: float) -> None:
    assert a.matched >= 0.95 * a.reference, str(a)
    assert a.extra <= 0.05 * a.reference, str(a)
    if a.reference:
        assert a.ious.mean() >= min_mean_iou, str(a)


@pytest.mark.parametrize("name", list(CLIPS))
def test_adapter_agrees_with_mediapipe(videos_dir: Path, name: str) -> None:
    """The adapter's own input preparation + decoding (what Detect runs when it uses
    the adapter's input hook) reproduces MediaPipe's boxes closely."""
    reference, frames = load_clip(videos_dir, name)
    ad = BlazeFace()
    pool = get_engine().load(resolve_model(MODEL), ad.input_spec).create_pool(1)
    found = []
    for bgr in frames:
        frame = Frame.from_image(bgr)
        image, box = ad.prepare_input(frame, (128, 128))
        dets = pool.run(image, lambda outs: ad.decode(outs, (128, 128)))
        found.append(box.detections_to_source(dets, (frame.width, frame.height)).xyxy)
    a = agreement(reference, found)
    print(f"{name}: {a}")
    check(a, 0.97)


@pytest.mark.parametrize("name", list(CLIPS))
def test_faces_pipeline_agrees_with_mediapipe(videos_dir: Path, name: str, tmp_path: Path) -> None:
    """End to end: `vapipe run faces` on the clip; boxes read back from its JSON Lines."""
    reference, _ = load_clip(videos_dir, name)
    graph = build_graph(load_config(ROOT / "pipelines.yaml").get("faces"))
    clip = videos_dir / CLIPS[name]
    summary = run_pipeline(graph, [str(clip)], RunOptions(output_dir=tmp_path, handle_signals=False))
    assert summary.error is None, summary.error
    records = [json.loads(line) for line in (tmp_path / f"{clip.stem}.jsonl").read_text().splitlines()]
    assert [r["seq"] for r in records] == list(range(len(reference)))
    found = [np.array([o["box"] for o in r["objects"] if o["label"] == "face"], np.float32).reshape(-1, 4)
             for r in records]
    a = agreement(reference, found)
    print(f"{name} (faces pipeline): {a}")
    check(a, 0.97)
    faces = [o for r in records for o in r["objects"] if o["label"] == "face"]
    # landmarks are kept where the landmark model confirms a face (presence >= 0.5), as MediaPipe does
    assert all(("landmarks" in o["attributes"]) == (o["attributes"]["face_presence"] >= 0.5) for o in faces)
    with_mesh = [o for o in faces if o["attributes"].get("landmarks") == 468]
    if name == "head_pose":  # clear frontal faces: every one gets a mesh
        assert len(with_mesh) == len(faces)
