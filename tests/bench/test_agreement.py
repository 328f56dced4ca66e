"""Agreement between modes and reading accuracy against a ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.agreement import evaluate, landmark_records, max_objects, read_truth, text_accuracy

TRUTH = [[{"text": "Hotel Central", "box": [10, 10, 200, 40]}, {"text": "KL 42 ABC", "box": [10, 100, 150, 130]},
          {"text": "Bus Stop", "box": [300, 10, 400, 40]}]]


def test_text_accuracy_counts_lines_read() -> None:
    records = {"0": {"objects": [
        {"box": [12, 11, 198, 41], "text": "Hotel Central"},      # exact
        {"box": [10, 100, 152, 128], "text": "KL42ABC"},          # spaces dropped: read, not exact
        {"box": [300, 10, 400, 40], "text": "Bus Step"},          # wrong
        {"box": [500, 300, 600, 330], "text": "Extra"}]}}         # not in the truth
    a = text_accuracy(records, TRUTH)
    assert (a["lines"], a["read"], a["exact"]) == (3, 2, 1)
    assert a["accuracy"] == round(2 / 3, 4) and a["exact_accuracy"] == round(1 / 3, 4)
    # a looping source: frame 3 of a 1-frame truth is truth frame 0; a box too far away reads nothing
    far = {"3": {"objects": [{"box": [10, 60, 200, 90], "text": "Hotel Central"}]}}
    assert text_accuracy(far, TRUTH)["read"] == 0 and text_accuracy(far, TRUTH)["lines"] == 3


def test_landmark_records_and_max_objects(tmp_path: Path) -> None:
    records = {"0": {"objects": [{"box": [0, 0, 100, 100], "landmarks": [[10, 20], [30, 5], [20, 40]]}]},
               "1": {"objects": [{"box": [0, 0, 1, 1], "landmarks": None}]},
               "2": {"objects": []}}
    out = landmark_records(records)
    assert list(out) == ["0"] and out["0"]["objects"][0]["box"] == [10, 5, 30, 40]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**records, "3": {"objects": [{"box": [0, 0, 1, 1]}] * 3}}))
    assert max_objects(path) == 3 and max_objects(tmp_path / "missing.json") == 0


def test_peer_without_detector_boxes_is_matched_on_landmarks(tmp_path: Path) -> None:
    lm = [[40, 40], [60, 45], [50, 70]]
    vapipe = {"0": {"objects": [{"box": [20, 10, 90, 95], "landmarks": lm}]}}     # a detector box, larger
    peer = {"0": {"objects": [{"box": [40, 40, 60, 70], "landmarks": [[41, 40], [60, 46], [50, 70]]}]}}
    for mode, rec in (("vapipe", vapipe), ("naive", vapipe), ("mediapipe", peer)):
        (tmp_path / f"{mode}.json").write_text(json.dumps(rec))
    out = evaluate(tmp_path, ["vapipe", "naive", "mediapipe", "hand-tuned"])
    assert set(out["agreement"]) == {"naive vs vapipe", "mediapipe vs vapipe"}   # hand-tuned wrote nothing
    assert out["agreement"]["mediapipe vs vapipe"]["matched"] == 1
    assert out["agreement"]["mediapipe vs vapipe"]["landmarks_mean_abs_px"] == pytest.approx(2 / 6, abs=1e-3)
    assert "accuracy" not in out


def test_bad_truth_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "truth.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError) as info:
        read_truth(bad)
    assert str(bad) in str(info.value) and "\n" not in str(info.value)
    bad.write_text(json.dumps({"frames": TRUTH}))
    assert read_truth(bad) == TRUTH
