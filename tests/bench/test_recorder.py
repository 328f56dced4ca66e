"""What the recorder keeps of a frame, the same in every mode."""

from __future__ import annotations

import numpy as np

from bench.measure import LANDMARK_FRAMES
from bench.recorder import BenchRecorder, detection_objects
from pipeline.frame import Detections, Frame


def _dets() -> Detections:
    d = Detections(xyxy=np.array([[1.234, 2, 30, 40], [5, 6, 7, 8]], np.float32),
                   score=np.array([0.91234, 0.5], np.float32), label=np.array(["face", "text"], object))
    d.attributes[0]["landmarks"] = np.array([[1.0, 2.0, 0.3], [3.0, 4.0, 0.1]], np.float32)
    d.attributes[1]["text"] = "Bus Stop"
    return d


def test_detection_objects() -> None:
    early, late = detection_objects(_dets(), 0), detection_objects(_dets(), LANDMARK_FRAMES)
    assert early[0]["box"] == [1.23, 2.0, 30.0, 40.0] and early[0]["score"] == 0.9123
    assert early[0]["label"] == "face" and early[0]["landmarks"] == [[1.0, 2.0], [3.0, 4.0]]   # x, y only
    assert "text" not in early[0] and early[1]["text"] == "Bus Stop"
    assert late[0]["landmarks"] is None and late[1]["text"] == "Bus Stop"


def test_recorder_keeps_first_frames_of_one_source() -> None:
    stage = BenchRecorder(keep=2, source="cam0")
    BenchRecorder.records.clear()
    for source, seq in (("cam0", 0), ("cam1", 1), ("cam0", 1), ("cam0", 2)):
        stage.source_id = source
        frame = Frame(source, seq, 64, 48, detections=_dets())
        assert stage.process(frame) is frame
    assert sorted(BenchRecorder.records) == [0, 1]
    assert len(BenchRecorder.records[1]["objects"]) == 2
