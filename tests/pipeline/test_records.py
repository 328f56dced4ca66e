"""How two runs' per-frame objects are matched: one to one, best IoU first."""

from __future__ import annotations

import numpy as np

from pipeline.records import box_iou, compare_records


def test_box_iou() -> None:
    m = box_iou(np.array([[0, 0, 10, 10]], float), np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]], float))
    assert np.allclose(m, [[1.0, 50 / 150, 0.0]])


def test_each_object_matches_once_and_takes_the_best_free_one() -> None:
    ref = {"0": {"objects": [{"box": [0, 0, 10, 10], "text": "A"}, {"box": [2, 0, 12, 10], "text": "B"}]}}
    # both reference boxes overlap the first other box best; the second must take the second one
    other = {"0": {"objects": [{"box": [1, 0, 11, 10], "text": "A"}, {"box": [3, 0, 13, 10], "text": "X"}]},
             "1": {"objects": [{"box": [0, 0, 1, 1]}]}}
    a = compare_records(ref, other)
    assert (a["frames"], a["objects_ref"], a["objects"], a["matched"]) == (1, 2, 2, 2)
    assert a["texts"] == 2 and a["texts_equal"] == 1
    assert 0.6 < a["min_iou"] <= a["mean_iou"] < 1.0


def test_landmarks_and_threshold() -> None:
    ref = {"0": {"objects": [{"box": [0, 0, 10, 10], "landmarks": [[1, 1], [2, 2]]}, {"box": [50, 50, 60, 60]}]}}
    other = {"0": {"objects": [{"box": [0, 0, 10, 10], "landmarks": [[1.5, 1], [2, 3]]}, {"box": [58, 58, 68, 68]}]}}
    a = compare_records(ref, other, min_iou=0.5)
    assert a["matched"] == 1 and a["landmarks_mean_abs_px"] == 0.375
    assert compare_records(ref, other, min_iou=0.01)["matched"] == 2
