"""Plain and weighted non-maximum suppression."""

from __future__ import annotations

import numpy as np
import pytest

from stages.models.nms import iou_matrix, nms, weighted_nms


def test_iou_matrix() -> None:
    a = np.array([[0, 0, 10, 10], [0, 0, 0, 0]], np.float32)
    b = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]], np.float32)
    m = iou_matrix(a, b)
    assert m.shape == (2, 3)
    np.testing.assert_allclose(m[0], [1.0, 50 / 150, 0.0])
    np.testing.assert_allclose(m[1], 0.0)  # empty box: no overlap, no division by zero
    assert iou_matrix(np.zeros((0, 4)), b).shape == (0, 3)


def test_plain_nms() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [20, 0, 30, 10], [0, 0, 10, 10.5]], np.float32)
    scores = np.array([0.5, 0.9, 0.7, 0.4], np.float32)
    keep = nms(boxes, scores, 0.5)
    assert keep.tolist() == [1, 2]
    assert nms(boxes, scores, 0.5, max_out=1).tolist() == [1]
    assert nms(boxes, scores, 0.99).tolist() == [1, 2, 0, 3]
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.5).tolist() == []


def test_threshold_is_strict() -> None:
    boxes = np.array([[0, 0, 10, 10], [5, 0, 15, 10]], np.float32)  # IoU exactly 1/3
    scores = np.array([0.9, 0.8])
    assert nms(boxes, scores, 1 / 3).tolist() == [0, 1]
    assert len(weighted_nms(boxes, scores, 1 / 3).boxes) == 2
    assert len(weighted_nms(boxes, scores, 0.3).boxes) == 1


def test_weighted_average_of_cluster() -> None:
    boxes = np.array([[1, 1, 11, 11], [0, 0, 10, 10], [50, 50, 60, 60]], np.float32)
    scores = np.array([0.6, 0.9, 0.8], np.float32)
    kps = np.array([[[2, 2]], [[0, 0]], [[55, 55]]], np.float32)
    res = weighted_nms(boxes, scores, 0.3, kps)
    assert res.index.tolist() == [1, 2]
    np.testing.assert_allclose(res.scores, [0.9, 0.8])
    np.testing.assert_allclose(res.boxes[0], [0.4, 0.4, 10.4, 10.4], atol=1e-5)
    np.testing.assert_allclose(res.keypoints[0], [[0.8, 0.8]], atol=1e-5)
    np.testing.assert_allclose(res.boxes[1], boxes[2])
    assert weighted_nms(boxes, scores, 0.3, max_out=1).boxes.shape == (1, 4)
    assert weighted_nms(boxes, scores, 0.3).keypoints is None


@pytest.mark.parametrize("keypoints", [np.zeros((0, 6, 2)), np.zeros((0, 12))])
def test_weighted_without_boxes_keeps_the_keypoint_shape(keypoints: np.ndarray) -> None:
    res = weighted_nms(np.zeros((0, 4)), np.zeros(0), 0.3, keypoints)
    assert res.boxes.shape == (0, 4) and res.keypoints.shape == (0, 6, 2) and res.index.tolist() == []


def test_members_join_only_the_first_cluster() -> None:
    # B overlaps A and C, A and C do not overlap: B is merged into A's cluster and
    # cannot pull C in later.
    boxes = np.array([[0, 0, 10, 10], [4, 0, 14, 10], [8, 0, 18, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    res = weighted_nms(boxes, scores, 0.3)
    assert res.index.tolist() == [0, 2]
    np.testing.assert_allclose(res.boxes[0], (0.9 * boxes[0] + 0.8 * boxes[1]) / 1.7, atol=1e-5)
    np.testing.assert_allclose(res.boxes[1], boxes[2])


def _reference_weighted(boxes: np.ndarray, scores: np.ndarray, thr: float) -> list[np.ndarray]:
    """Straightforward per-box loop, written from the algorithm's description."""
    remaining = sorted(range(len(boxes)), key=lambda i: -scores[i])
    out = []
    while remaining:
        top = remaining[0]
        cluster = [i for i in remaining if iou_matrix(boxes[i], boxes[top])[0, 0] > thr]
        remaining = [i for i in remaining if i not in cluster]
        w = scores[cluster]
        out.append((boxes[cluster] * w[:, None]).sum(0) / w.sum())
    return out


@pytest.mark.parametrize("seed", range(5))
def test_weighted_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 50, (40, 2))
    wh = rng.uniform(5, 20, (40, 2))
    boxes = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    scores = rng.uniform(0.1, 1.0, 40).astype(np.float32)
    got = weighted_nms(boxes, scores, 0.3).boxes
    want = _reference_weighted(boxes, scores, 0.3)
    assert len(got) == len(want)
    np.testing.assert_allclose(got, np.array(want), atol=1e-4)
