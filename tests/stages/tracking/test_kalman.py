from __future__ import annotations

import numpy as np

from stages.tracking.kalman import BoxKalman, state_to_xyxy, xyxy_to_state


def test_state_round_trip() -> None:
    boxes = np.array([[10, 20, 50, 100], [0, 0, 4, 2]], np.float64)
    assert np.allclose(state_to_xyxy(xyxy_to_state(boxes)), boxes)


def test_constant_velocity_is_learnt_and_extrapolated() -> None:
    kf = BoxKalman()
    box = np.array([[100.0, 50.0, 140.0, 130.0]])
    mean, cov = kf.initiate(box)
    for _ in range(40):  # 3 px/frame right, 1 px/frame down
        box = box + [3, 1, 3, 1]
        mean, cov = kf.predict(mean, cov)
        mean, cov = kf.update(mean, cov, box)
    assert np.allclose(mean[0, 4:6], [3, 1], atol=0.15)
    ahead, _ = kf.predict(mean, cov, steps=5)
    assert np.allclose(state_to_xyxy(ahead)[0], box[0] + [15, 5, 15, 5], atol=1.5)


def test_filters_run_independently_per_row() -> None:
    kf = BoxKalman()
    mean, cov = kf.initiate(np.array([[0.0, 0, 10, 10], [100, 100, 140, 180]]))
    moved, cov2 = kf.update(mean, cov, np.array([[2.0, 0, 12, 10], [100, 100, 140, 180]]))
    assert moved[0, 0] > mean[0, 0] and np.allclose(moved[1, :4], mean[1, :4])
    assert np.all(np.linalg.eigvalsh(cov2) > 0)  # still a covariance
