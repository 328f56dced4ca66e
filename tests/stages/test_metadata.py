"""Metadata sink: JSON Lines per frame, flushed as it goes; output path helpers."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from pipeline.stage import StageError
from stages._paths import resolve_output, safe_name
from stages.metadata import Metadata


def make_stage(tmp_path: Path, source: str = "lobby cam", **params) -> Metadata:
    stage = Metadata(**params)
    stage.source_id = source
    stage.output_dir = tmp_path
    return stage


def frame(seq: int, det: Detections | None = None, pts: int | None = None) -> Frame:
    f = Frame.from_image(np.zeros((48, 64, 3), np.uint8), "lobby cam", seq, pts=pts,
                         time_base=Fraction(1, 90_000) if pts is not None else None)
    if det is not None:
        f.detections = det
    return f


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def faces() -> Detections:
    return Detections(
        xyxy=[[1.234, 2, 30.5, 40], [5, 6, 7, 8]], score=[0.91234, 0.5], label=["face", "person"],
        track_id=[4, -1],
        keypoints=[np.array([[3, 4], [5.555, 6]], np.float32), None],
        attributes=[{"landmarks": np.random.default_rng(0).random((468, 3)).astype(np.float32) * 60,
                     "age": np.float32(31.7), "gender": "female"}, {}],
    )


def test_one_record_per_frame_flushed_before_close(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    stage.ensure_open()
    for i in range(5):
        f = frame(i, faces() if i % 2 == 0 else None, pts=i * 3600 if i else None)
        assert stage(f) is f
        got = lines(tmp_path / "lobby_cam.jsonl")  # read while the stage is still open
        assert len(got) == i + 1
    recs = lines(stage.path)
    assert [r["seq"] for r in recs] == [0, 1, 2, 3, 4]
    for r in recs:
        assert set(r) == {"source", "seq", "pts_time", "width", "height", "objects"}
        assert r["source"] == "lobby cam" and (r["width"], r["height"]) == (64, 48)
        assert isinstance(r["seq"], int) and isinstance(r["objects"], list)
    assert recs[0]["pts_time"] is None and recs[1]["pts_time"] == pytest.approx(0.04)
    assert recs[1]["objects"] == []
    face, person = recs[2]["objects"]
    assert face["label"] == "face" and isinstance(face["score"], float) and face["score"] == pytest.approx(0.9123)
    assert face["box"] == [1.23, 2.0, 30.5, 40.0] and all(isinstance(v, float) for v in face["box"])
    assert face["track_id"] == 4 and person["track_id"] is None
    np.testing.assert_allclose(face["keypoints"], [[3, 4], [5.555, 6]], atol=0.01)
    assert "keypoints" not in person
    assert face["attributes"]["gender"] == "female" and face["attributes"]["age"] == pytest.approx(31.7)
    # landmarks are replaced by their count by default
    assert face["attributes"]["landmarks"] == 468
    assert person["attributes"] == {}
    stage.close()
    stage.close()  # twice is fine
    assert len(lines(stage.path)) == 5


def test_include_landmarks(tmp_path: Path) -> None:
    det = faces()
    with make_stage(tmp_path, include_landmarks=True) as stage:
        stage(frame(0, det))
    lm = lines(stage.path)[0]["objects"][0]["attributes"]["landmarks"]
    assert len(lm) == 468 and len(lm[0]) == 3
    np.testing.assert_allclose(lm, det.attributes[0]["landmarks"], atol=1e-3)
    assert isinstance(det.attributes[0]["landmarks"], np.ndarray), "the frame's detections are not changed"


def test_landmarks_dropped_without_touching_detections(tmp_path: Path) -> None:
    det = faces()
    with make_stage(tmp_path) as stage:
        stage(frame(0, det))
    assert det.attributes[0]["landmarks"].shape == (468, 3)


def test_flush_every(tmp_path: Path) -> None:
    stage = make_stage(tmp_path, flush_every=3)
    stage.ensure_open()
    for i in range(3):
        stage(frame(i))
    assert len(lines(stage.path)) == 3
    stage(frame(3))
    stage.close()
    assert len(lines(stage.path)) == 4
    with pytest.raises(Exception):
        Metadata(flush_every=0)


def test_events_are_written_and_flushed(tmp_path: Path) -> None:
    stage = make_stage(tmp_path, flush_every=100)
    stage.ensure_open()
    stage(frame(0))
    stage.write_event("camera_lost", reason="timeout", retries=np.int64(3))
    recs = lines(stage.path)  # the event flushes the frame record before it too
    assert len(recs) == 2
    ev = recs[1]
    assert ev["event"] == "camera_lost" and ev["source"] == "lobby cam"
    assert isinstance(ev["time"], float) and ev["time"] > 1.6e9
    assert ev["reason"] == "timeout" and ev["retries"] == 3
    stage.close()


def test_non_finite_numbers_become_null(tmp_path: Path) -> None:
    det = Detections(xyxy=[[0, 0, 1, 1]], score=[np.nan], label=["x"], attributes=[{"speed": float("inf")}])
    with make_stage(tmp_path) as stage:
        stage(frame(0, det))
    text = stage.path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    obj = lines(stage.path)[0]["objects"][0]
    assert obj["score"] is None and obj["attributes"]["speed"] is None


def test_reopen_truncates_but_late_writes_append(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    with stage:
        stage(frame(0))
        stage(frame(1))
    stage(frame(9))  # after the block: appended, not a new file
    assert [r["seq"] for r in lines(stage.path)] == [0, 1, 9]
    stage.ensure_open(reopen=True)
    stage(frame(2))
    stage.close()  # runtime shutdown; a frame still in flight arrives afterwards
    stage(frame(3))
    stage.close()
    assert [r["seq"] for r in lines(stage.path)] == [2, 3]


def test_safe_name() -> None:
    assert safe_name("lobby cam") == "lobby_cam"
    assert safe_name("cam-01.front") == "cam-01.front"
    name = safe_name("rtsp://admin:secret@10.1.2.3:554/Streaming/Channels/101")
    assert "secret" not in name and "admin" not in name
    assert name == "rtsp_10.1.2.3_554_Streaming_Channels_101"
    assert safe_name("../../etc/passwd") == "etc_passwd"
    assert safe_name("") == "source" and safe_name("///") == "source"
    long_a, long_b = "x" * 200 + "a", "x" * 200 + "b"
    assert len(safe_name(long_a)) <= 80 and safe_name(long_a) != safe_name(long_b)


def test_resolve_output(tmp_path: Path) -> None:
    class S:
        source_id = "cam/1"
        output_dir = tmp_path / "out"
        name = "meta"

    path = resolve_output("{output}/{name}/{source}.jsonl", S())
    assert path == tmp_path / "out" / "meta" / "cam_1.jsonl" and path.parent.is_dir()
    with pytest.raises(StageError, match="template"):
        resolve_output("{output}/{camera}.jsonl", S())


def test_append_keeps_what_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "lobby_cam.jsonl"
    path.write_text('{"event":"placed","source":"lobby cam"}\n{"source":"lobby cam","seq":0}\n', encoding="utf-8")
    with make_stage(tmp_path, append=True) as stage:
        stage(frame(1))
    recs = lines(path)
    assert [r.get("event") for r in recs] == ["placed", None, None]
    assert [r["seq"] for r in recs[1:]] == [0, 1]
    with make_stage(tmp_path) as stage:  # the default starts the file anew
        stage(frame(2))
    assert [r["seq"] for r in lines(path)] == [2]


def test_a_path_that_cannot_be_written_is_one_line_naming_the_stage_on_open(tmp_path: Path) -> None:
    (tmp_path / "out.jsonl").mkdir()  # a directory in the way of the file
    with pytest.raises(StageError, match=r"^metadata: output .*out\.jsonl is a folder; give a file name"):
        Metadata(path=str(tmp_path / "out.jsonl")).open()
    (tmp_path / "flat").write_text("")  # a file in the way of the folder
    with pytest.raises(StageError, match=r"^metadata: cannot write .*flat/sub/out\.jsonl: .*flat is not a folder$"):
        Metadata(path=str(tmp_path / "flat" / "sub" / "out.jsonl")).open()
