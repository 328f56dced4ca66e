"""Record shapes: DL Streamer Pipeline Server's messages, and sinks sharing one output file."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pipeline.frame import RECORD, Detections, Frame
from stages.metadata import Metadata
from stages.records import dlstreamer_record, vapipe_record


@dataclass(slots=True)
class _WithClassIds(Detections):
    """Detections as a detector that knows class indices reports them."""

    class_id: np.ndarray | None = None


def _frame(det: Detections) -> Frame:
    frame = Frame.from_image(np.zeros((200, 400, 3), np.uint8), "cam", 3, pts=3, time_base=Fraction(1, 2))
    frame.detections = det
    return frame


def test_label_id_from_class_ids_then_label_order_else_omitted() -> None:
    boxes = [[-10, 20, 100, 220], [200, 0, 300, 100]]
    with_ids = _WithClassIds(xyxy=boxes, score=[0.9, 0.8], label=["car", "bus"], class_id=np.array([2, 5]))
    rec = dlstreamer_record(_frame(with_ids), labels=["bus", "car"])
    assert [o["detection"]["label_id"] for o in rec["objects"]] == [2, 5]  # the detector's ids win
    plain = Detections(xyxy=boxes, score=[0.9, 0.8], label=["car", "truck"])
    rec = dlstreamer_record(_frame(plain), labels=["bus", "car"])
    assert rec["objects"][0]["detection"]["label_id"] == 1 and "label_id" not in rec["objects"][1]["detection"]
    first = rec["objects"][0]
    # clipped to the frame, normalised box and integer pixels agree
    assert first["detection"]["bounding_box"] == {"x_min": 0.0, "y_min": 0.1, "x_max": 0.25, "y_max": 1.0}
    assert (first["x"], first["y"], first["w"], first["h"]) == (0, 20, 100, 180)
    assert rec["timestamp"] == 1_500_000_000 and rec["resolution"] == {"width": 400, "height": 200}
    assert "id" not in first


def test_attributes_become_classification_results() -> None:
    det = Detections(xyxy=[[0, 0, 10, 10]], score=[0.7], label=["text"], track_id=[7],
                     attributes=[{"text": "EXIT", "text_score": 0.93, "color": {"label": "red", "confidence": 0.6},
                                  "landmarks": np.zeros((468, 3))}])
    obj = dlstreamer_record(_frame(det), tags={"site": 1})["objects"][0]
    assert obj["text"] == {"label": "EXIT", "confidence": 0.93} and obj["color"]["label"] == "red"
    assert obj["id"] == 7 and obj["attributes"]["landmarks"] == 468


def test_sinks_writing_one_path_share_it(tmp_path: Path) -> None:
    path = tmp_path / "all.json"
    sinks = []
    for cam in ("a", "b"):
        sink = Metadata(path=str(path), format="json", schema="dlstreamer")
        sink.source_id = cam
        sink.open()
        sinks.append(sink)

    def feed(sink: Metadata) -> None:
        for seq in range(50):
            frame = _frame(Detections())
            frame.seq, frame.source_id = seq, sink.source_id
            sink.process(frame)

    threads = [threading.Thread(target=feed, args=(s,)) for s in sinks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sinks[0].close()
    assert not path.read_text().rstrip().endswith("]")  # still open for the other camera
    sinks[1].close()
    records = json.loads(path.read_text())
    assert len(records) == 100 and {r["source"] for r in records} == {"a", "b"}


def test_fields_of_several_stages_are_merged_and_the_fixed_ones_win() -> None:
    f = Frame.from_image(np.zeros((40, 60, 3), np.uint8), "cam", 3)
    f.attrs[("doors", RECORD)] = {"occupancy": {"hall": {"person": 1}}, "seq": 99}
    f.attrs[("desks", RECORD)] = {"occupancy": {"desk": {"person": 2}, "hall": {"cat": 5}}, "note": "x"}
    rec = vapipe_record(f)
    assert rec["seq"] == 3 and rec["note"] == "x"
    assert rec["occupancy"] == {"hall": {"person": 1}, "desk": {"person": 2}}  # the first stage's on a clash


def test_a_json_array_goes_to_a_json_file_unless_a_path_is_given(tmp_path: Path) -> None:
    """A .jsonl name would send JSON Lines readers to an array."""
    written = {}
    for fmt, path in (("json", None), ("json-lines", None), ("json", "{output}/{source}-all.jsonl")):
        sink = Metadata(format=fmt, **({"path": path} if path else {}))
        sink.output_dir = tmp_path
        with sink:
            sink(_frame(Detections()))
        written[(fmt, path)] = sink.path.name
    assert written == {("json", None): "cam.json", ("json-lines", None): "cam.jsonl",
                       ("json", "{output}/{source}-all.jsonl"): "cam-all.jsonl"}
    assert json.loads((tmp_path / "cam.json").read_text())[0]["source"] == "cam"


@pytest.mark.parametrize("fmt", ["json-lines", "json"])
def test_a_camera_that_starts_writing_after_another_finished_a_shared_file_adds_to_it(tmp_path: Path,
                                                                                   fmt: str) -> None:
    """The sinks of one run share a path: the second camera's first record may come after the
    first camera closed the file (a short clip beside a camera still connecting); it used to
    start the file anew, and the first camera's records were lost."""
    from pipeline.outputs import RunFiles

    run_files, path = RunFiles(), tmp_path / ("all.jsonl" if fmt == "json-lines" else "all.json")
    for cam, frames in (("a", 3), ("b", 2)):
        sink = Metadata(path=str(path), format=fmt)
        sink.source_id, sink.run_files = cam, run_files
        with sink:
            for seq in range(frames):
                frame = _frame(Detections())
                frame.seq, frame.source_id = seq, cam
                sink(frame)
    text = path.read_text()
    records = [json.loads(line) for line in text.splitlines()] if fmt == "json-lines" else json.loads(text)
    assert [(r["source"], r["seq"]) for r in records] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    sink = Metadata(path=str(path), format=fmt)  # another run: the file is written anew
    sink.run_files = RunFiles()
    with sink:
        sink(_frame(Detections()))
    text = path.read_text()
    assert len(text.splitlines() if fmt == "json-lines" else json.loads(text)) == 1
