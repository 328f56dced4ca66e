"""The in-memory sink that replaces output stages in the vapipe modes, and how
detections become recorded objects (the same for vapipe and the baselines)."""

from __future__ import annotations

from typing import Any, ClassVar

from pipeline.stage import Params, Stage

from .measure import LANDMARK_FRAMES, object_record

__all__ = ["BenchRecorder", "RECORDER_TYPE", "detection_objects"]

#: the stage type of :class:`BenchRecorder` in a pipeline spec
RECORDER_TYPE = "bench.recorder:BenchRecorder"


def detection_objects(dets: Any, seq: int) -> list[dict[str, Any]]:
    """Recorded objects of one frame: box, score, label, text and, for the first
    ``LANDMARK_FRAMES`` frames, landmarks (``attributes["landmarks"]``)."""
    objs = []
    for i in range(len(dets)):
        attrs = dets.attributes[i] or {}
        lm = attrs.get("landmarks") if seq < LANDMARK_FRAMES else None
        objs.append(object_record(dets.xyxy[i], dets.score[i], dets.label[i], lm, attrs.get("text")))
    return objs


class BenchRecorder(Stage):
    """Leaf stage: keeps the first ``keep`` frames of source ``source`` in memory
    (:attr:`records`, ``{seq: {"objects": [...]}}``); writes no files, encodes nothing."""

    kind: ClassVar[str] = "sink"

    class Params(Params):
        keep: int = 0
        source: str = ""

    records: ClassVar[dict[int, dict[str, Any]]] = {}

    def process(self, frame: Any) -> Any:
        if frame.seq < self.params.keep and self.source_id == self.params.source:
            BenchRecorder.records[frame.seq] = {"objects": detection_objects(frame.detections, frame.seq)}
        return frame
