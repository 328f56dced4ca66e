"""``classify.reclassify`` on tracked objects, with a synthetic region model (mean colour of the
crop) and a test adapter that counts its runs: no shared assets needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from pipeline.engine import InputSpec
from pipeline.frame import DETECTION_RAN, Detections, Frame
from stages.classify import Classify
from stages.models.base import RoiAdapter, register
from stages.models.face_landmarks import FaceLandmarks, FaceMesh
from stages.track import Track


@register("test_mean_colour")
class MeanColour(RoiAdapter):
    """attributes["mean"]: the crop's mean (R, G, B); ``runs`` lists (frame, track id) of decoded crops."""

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="BGR", model_color="RGB")
    runs: ClassVar[list[tuple[int, int]]] = []

    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        x1, y1, x2, y2 = (int(v) for v in dets.xyxy[i])
        crop = np.ascontiguousarray(frame.image()[y1:y2, x1:x2])
        import cv2

        return (cv2.resize(crop, (input_hw[1], input_hw[0]), interpolation=cv2.INTER_AREA),
                (frame.seq, int(dets.track_id[i])))

    def decode(self, outputs: list[np.ndarray], context: Any) -> tuple[float, ...]:
        MeanColour.runs.append(context)
        return tuple(float(v) for v in np.asarray(outputs[0]).reshape(-1))

    def apply(self, dets: Detections, i: int, result: Any) -> None:
        dets.attributes[i]["mean"] = result


@pytest.fixture(scope="module")
def mean_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3, 8, 8], np.float32, name="x")
    mean = ops.reduce_mean(x, ops.constant(np.array([2, 3], np.int64)), keep_dims=False)
    path = tmp_path_factory.mktemp("model") / "mean_colour.xml"
    ov.save_model(ov.Model([mean], [x], "mean_colour"), str(path))
    return path


def frames(n: int) -> list[Frame]:
    """Two coloured squares moving right; the first changes colour every frame."""
    out = []
    for s in range(n):
        image = np.zeros((120, 200, 3), np.uint8)
        x = 10 + 2 * s
        image[20:60, x:x + 40] = (0, 0, 10 * s)       # red grows with s (BGR)
        image[70:110, x + 100:x + 140] = (200, 0, 0)  # blue
        f = Frame.from_image(image, "cam", s)
        f.detections = Detections(xyxy=[[x, 20, x + 40, 60], [x + 100, 70, x + 140, 110]], score=[0.9, 0.9],
                                  label=["box", "box"])
        f.attrs[("detector", DETECTION_RAN)] = True
        out.append(f)
    return out


# Track ids 1 and 2 from frame 1 on; with N = 3 a track's second run comes id % 3 frames early,
# so that the two objects' runs fall on different frames.
@pytest.mark.parametrize("every, runs", [(1, {1: list(range(1, 10)), 2: list(range(1, 10))}),
                                         (3, {1: [1, 3, 6, 9], 2: [1, 2, 5, 8]}),
                                         (0, {1: [1], 2: [1]})])
def test_reclassify_runs_every_n_frames_and_objects_keep_their_last_attributes(
        mean_model: Path, every: int, runs: dict[int, list[int]]) -> None:
    MeanColour.runs.clear()
    seen: list[tuple[int, int, float]] = []
    with Track() as track, Classify(model=str(mean_model), decoder="test_mean_colour", on=["box"],
                                    reclassify=every, requests=2) as cls:
        for f in frames(10):
            cls.submit(track(f))
            for done in cls.poll():
                seen += [(done.seq, int(t), a["mean"][0]) for t, a in
                         zip(done.detections.track_id, done.detections.attributes) if "mean" in a]
        for done in cls.drain():
            seen += [(done.seq, int(t), a["mean"][0]) for t, a in
                     zip(done.detections.track_id, done.detections.attributes) if "mean" in a]
    # frame 0: no ids yet (min_hits 2), the model runs on both objects
    assert sorted(MeanColour.runs[:2]) == [(0, -1), (0, -1)]
    for tid, expected in runs.items():
        assert sorted(seq for seq, t in MeanColour.runs if t == tid) == expected
    red = {seq: value for seq, tid, value in seen if tid == 1}
    assert sorted(red) == list(range(1, 10))  # every frame has the attribute
    for seq, value in red.items():  # the value of the latest run at or before seq
        ran = max(r for r in runs[1] if r <= seq)
        assert value == pytest.approx(10 * ran, abs=1.0)


def test_landmarks_move_with_the_box_between_runs() -> None:
    mesh = FaceMesh(landmarks=np.array([[10.0, 10.0], [30.0, 50.0]], np.float32), presence=0.9)
    moved = FaceLandmarks().carry(mesh, np.array([10, 10, 30, 50]), np.array([20, 10, 60, 90]))
    assert np.allclose(moved.landmarks, [[20, 10], [60, 90]]) and moved.presence == 0.9


def test_a_stage_whose_on_labels_never_came_says_which_did(mean_model: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="vapipe"):
        with Classify(model=str(mean_model), decoder="test_mean_colour", on=["boxes"], name="colour") as cls:
            for f in frames(3):
                cls(f)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["stage 'colour': no object labelled 'boxes' reached it (on: ['boxes']); "
                        "objects that did: box"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="vapipe"):
        with Classify(model=str(mean_model), decoder="test_mean_colour", on=["box"]) as cls:
            for f in frames(3):
                cls(f)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
