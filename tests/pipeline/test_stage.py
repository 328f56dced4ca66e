"""A stage built in Python (embedded without the runner): its parameters and their errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.frame import Frame
from pipeline.stage import InferStage, Params, Stage, StageError
from stages.decode import Decode
from stages.detect import Detect
from stages.track import Track


def test_parameters_by_name_as_a_dict_or_as_params_with_changes() -> None:
    assert Track(min_hits=3).params.min_hits == 3
    assert Track({"min_hits": 3}, lost_frames=5).params.lost_frames == 5
    base = Detect.Params(model="m.xml", decoder="ssd")
    changed = Detect(base, requests=3)
    assert (changed.params.requests, changed.params.model, base.requests) == (3, "m.xml", 0)


@pytest.mark.parametrize("make, error, message", [
    (lambda: Detect(modle="m.xml"), ValueError, r"^Detect: unknown parameter 'modle'; valid: .*\bmodel\b"),
    (lambda: Decode(uri="a.mp4", threads="many"), ValueError,
     r"^Decode: parameter 'threads': Input should be a valid integer.* \(got 'many'\)$"),
    (lambda: Detect(Detect.Params(model="m.xml", decoder="ssd"), requests=-1), ValueError,
     r"^Detect: parameter 'requests': Input should be greater than or equal to 0 \(got -1\)$"),
    (lambda: Detect("omz/person-detection-retail-0013"), TypeError,
     r"^Detect: the first argument is the parameters \(Detect.Params or a dict\), got "
     r"'omz/person-detection-retail-0013'; pass parameters by name, e.g. Detect\(model=...\)$"),
    (lambda: Track(min_hits=0), ValueError, r"^Track: parameter 'min_hits': Input should be greater than or equal"),
])
def test_bad_parameters_are_one_line_naming_the_stage_and_the_parameter(make, error, message) -> None:
    with pytest.raises(error, match=message) as info:
        make()
    assert "\n" not in str(info.value)


class _Counting(Stage):
    """Counts opens and closes; its close does not call the base class's."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.opens = self.closes = 0

    def open(self) -> None:
        self.opens += 1

    def close(self) -> None:
        self.closes += 1


def test_a_with_block_opens_a_stage_closed_before_it() -> None:
    stage = _Counting()
    frame = Frame.from_image(np.zeros((8, 8, 3), np.uint8))
    stage(frame)  # opened on first use
    stage.close()
    with stage:  # closed by hand: the block opens it again
        stage(frame)
    assert (stage.opens, stage.closes) == (2, 2)
    with stage:
        pass
    assert (stage.opens, stage.closes) == (3, 3)


def test_a_frame_after_close_opens_a_stage_again_but_not_a_sink() -> None:
    class _Sink(_Counting):
        kind = "sink"

    frame = Frame.from_image(np.zeros((8, 8, 3), np.uint8))
    for stage, opens in ((_Counting(), 2), (_Sink(), 1)):
        with stage:
            stage(frame)
        stage(frame)
        assert stage.opens == opens, type(stage).__name__


def test_a_source_reads_from_the_start_again_after_close(tmp_path: Path) -> None:
    from tests.media import ClipSpec, write_clip

    source = Decode(uri=str(write_clip(tmp_path / "c.mp4", ClipSpec(frames=6))))
    assert [f.seq for f in source.frames()] == list(range(6))
    source.close()
    assert [f.seq for f in source.frames()] == list(range(6))
    source.close()


def test_anything_but_a_frame_is_refused_in_one_line() -> None:
    with pytest.raises(TypeError, match=r"^stage '_counting' takes a pipeline.frame.Frame, got ndarray; make one "
                                        r"from a BGR image with Frame.from_image"):
        _Counting()(np.zeros((8, 8, 3), np.uint8))  # type: ignore[arg-type]


def test_calling_an_inference_stage_with_frames_submitted_and_not_collected_is_an_error() -> None:
    image = np.zeros((96, 128, 3), np.uint8)
    with Detect(model="mediapipe/face_detection_short_range", decoder="blazeface") as det:
        det.submit(Frame.from_image(image, "cam", 0))
        with pytest.raises(StageError, match=r"1 frame\(s\) submitted with submit\(\) are still in flight"):
            det(Frame.from_image(image, "cam", 1))
        assert [f.seq for f in det.drain()] == [0]  # nothing was lost
        assert det(Frame.from_image(image, "cam", 2)).seq == 2


def test_a_reconfigured_stage_keeps_the_frames_submitted_after_it() -> None:
    from pipeline.testing import SleepInfer

    class Counted(SleepInfer):
        opens = 0

        def open(self) -> None:
            Counted.opens += 1
            super().open()

    frame = lambda seq: Frame.from_image(np.zeros((8, 8, 3), np.uint8), "cam", seq)  # noqa: E731
    out = []
    with Counted(ms=5, requests=2) as stage:
        for seq in range(3):
            stage.submit(frame(seq))
            out += stage.poll()
        stage.reconfigure({"requests": 3})
        for seq in range(3, 8):
            stage.submit(frame(seq))  # the first applies the change; none may open the stage again
            out += stage.poll()
        out += stage.drain()
    assert [f.seq for f in out] == list(range(8)) and Counted.opens == 2  # at the start and for the change


class _FailsOn(InferStage):
    """Inference finished at once that fails on the frames in ``fail``."""

    class Params(Params):
        fail: list[int] = []

    params: Params

    def start(self, frame: Frame) -> int:
        return frame.seq

    def is_done(self, ticket: int) -> bool:
        return True

    def complete(self, frame: Frame, ticket: int) -> Frame:
        if ticket in self.params.fail:
            raise ValueError(f"inference failed on frame {ticket}")
        return frame


@pytest.mark.parametrize("collect", ["poll", "drain"])
def test_a_failed_inference_loses_no_other_frame(collect: str) -> None:
    stage = _FailsOn(fail=[2, 3])
    for seq in range(6):
        stage.submit(Frame.from_image(np.zeros((8, 8, 3), np.uint8), "cam", seq))
    take = getattr(stage, collect)
    assert [f.seq for f in take()] == [0, 1]  # the frames before the failure
    with pytest.raises(ValueError, match="failed on frame 2$"):
        take()
    with pytest.raises(ValueError, match="failed on frame 3$"):
        take()
    assert [f.seq for f in take()] == [4, 5] and stage.in_flight == 0
