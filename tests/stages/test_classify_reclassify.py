"""``classify.reclassify`` on tracked objects, with a synthetic region model (mean colour of the
crop) and a test adapter that counts its runs: no shared assets needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from pipeline.engine import InputSpec
from pipeline.frame import DETECTION_RAN, TRACK_BOXES, Detections, Frame
from stages.classify import Classify
from stages.models.base import RoiAdapter, register
from stages.models.face_landmarks import FaceLandmarks, FaceMesh
from stages.track import Track
from stages.tracking.boxes import follow_box


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


@register("test_centroid")
class Centroid(RoiAdapter):
    """A position result: the centroid (x, y) in frame pixels of the lit pixels of the crop,
    measured on the host (the model's output is not used); carried with the box as landmarks are."""

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="BGR", model_color="RGB")

    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        x1, y1, x2, y2 = (int(round(v)) for v in dets.xyxy[i])
        ys, xs = np.nonzero(frame.image()[max(y1, 0):y2, max(x1, 0):x2, 0])
        return np.zeros((*input_hw, 3), np.uint8), np.array([[xs.mean() + max(x1, 0), ys.mean() + max(y1, 0)]])

    def decode(self, outputs: list[np.ndarray], context: Any) -> np.ndarray:
        return context

    def carry(self, result: np.ndarray, old_box: np.ndarray, new_box: np.ndarray) -> np.ndarray:
        return follow_box(result, old_box, new_box)

    def apply(self, dets: Detections, i: int, result: np.ndarray) -> None:
        dets.attributes[i]["centre"] = result[0]


def jittery_detections(n: int, every: int) -> list[tuple[Frame, float]]:
    """A square moving 4 px right per frame, detected every ``every`` frames with a box 6 px to
    the left or right of it in turn (as detectors' boxes jitter); the square's true centre x."""
    out = []
    for s in range(n):
        image = np.zeros((120, 400, 3), np.uint8)
        x = 20 + 4 * s
        image[40:80, x:x + 40] = 255
        f = Frame.from_image(image, "cam", s)
        ran = s % every == 0
        shift = 6 if (s // every) % 2 else -6
        f.detections = Detections(xyxy=[[x + shift, 40, x + 40 + shift, 80]], score=[0.9], label=["box"]) if ran \
            else Detections()
        f.attrs[("detector", DETECTION_RAN)] = ran
        out.append((f, x + 19.5))
    return out


@pytest.mark.parametrize("estimates", [True, False])
def test_positions_are_carried_by_the_trackers_estimate_not_by_box_jumps(
        mean_model: Path, estimates: bool) -> None:
    """On a detection frame after a run on a predicted box, the detected box differs from the
    prediction by the detector's jitter; carried by the tracker's estimates (smooth), the centre
    stays on the object; carried by the boxes themselves, it jumps with the jitter."""
    errors = {}
    with Track(min_hits=1) as track, Classify(model=str(mean_model), decoder="test_centroid", on=["box"],
                                              reclassify=3) as cls:
        for f, true_x in jittery_detections(60, every=2):
            f = track(f)
            if not estimates:
                f.attrs = {k: v for k, v in f.attrs.items() if k[1] != TRACK_BOXES}
            done = cls(f)
            if len(done.detections) and "centre" in done.detections.attributes[0]:
                errors[done.seq] = abs(done.detections.attributes[0]["centre"][0] - true_x)
    detection_frames = [e for seq, e in errors.items() if seq % 2 == 0 and seq >= 20]
    assert len(errors) >= 55
    if estimates:
        assert max(detection_frames) < 4.0, errors
    else:
        assert max(detection_frames) > 6.0, errors

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


def test_objects_without_a_pixel_in_the_frame_are_left_unclassified(mean_model: Path) -> None:
    """Boxes given by hand may lie outside the frame, be inverted or hold NaN: no crop to show
    the model, so no attributes (a model shown black padding answers with confidence)."""
    f = frames(1)[0]
    f.detections = Detections(xyxy=[[10, 20, 50, 60], [-50, -50, -10, -10], [300, 20, 340, 60], [50, 60, 10, 20],
                                    [np.nan, 20, 50, 60], [190, 110, 260, 160]],
                              score=[0.9] * 6, label=["box"] * 6)
    with Classify(model=str(mean_model), decoder="test_mean_colour", on=["box"]) as cls:
        out = cls(f)
    assert ["mean" in a for a in out.detections.attributes] == [True, False, False, False, False, True]
