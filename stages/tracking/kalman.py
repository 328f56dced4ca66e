"""Constant-velocity Kalman filter for many boxes at once.

State per box: ``(cx, cy, w, h, vx, vy, vw, vh)``: centre, size and their
change per frame, in source pixels.  The box is measured directly (``cx, cy,
w, h``).  Noise is relative to the box's size (a box twice as big moves and
jitters twice as much in pixels): standard deviations per frame are
``pos_std`` (process noise of positions and sizes), ``vel_std`` (of
velocities) and ``meas_std`` (of a detection's box) times the box's width for
x and w, and its height for y and h; a new track's velocity starts at 0
with ``init_vel_std`` (a tenth of its size per frame, so the first
detections teach it the speed).  The defaults trust the motion model
more than single detections (smooth velocities, few id switches when people
cross); they were chosen on noisy detections of the TUD pedestrian sequences
(tests/stages/tracking).  All arrays carry a leading axis N, one row per box.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BoxKalman", "xyxy_to_state", "state_to_xyxy"]

_WH = [2, 3, 2, 3, 2, 3, 2, 3]  # state components of w and h, in the order of the scales


def xyxy_to_state(xyxy: np.ndarray) -> np.ndarray:
    """(N, 4) corners -> (N, 4) centre and size."""
    xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4)
    wh = xyxy[:, 2:] - xyxy[:, :2]
    return np.concatenate([xyxy[:, :2] + wh / 2, wh], axis=1)


def state_to_xyxy(state: np.ndarray) -> np.ndarray:
    """(N, >=4) states -> (N, 4) corners (sizes below one pixel are raised to one)."""
    state = np.asarray(state, np.float64).reshape(len(state), -1)
    half = np.maximum(state[:, 2:4], 1.0)
    half *= 0.5
    out = np.empty((len(state), 4))
    np.subtract(state[:, :2], half, out=out[:, :2])
    np.add(state[:, :2], half, out=out[:, 2:])
    return out


class BoxKalman:
    """Predicts and corrects (N, 8) means with (N, 8, 8) covariances."""

    def __init__(self, pos_std: float = 1 / 80, vel_std: float = 1 / 640, meas_std: float = 1 / 20,
                 init_vel_std: float = 0.1) -> None:
        if min(pos_std, vel_std, meas_std, init_vel_std) <= 0:
            raise ValueError(f"Kalman noise must be > 0, got pos_std={pos_std}, vel_std={vel_std}, "
                             f"meas_std={meas_std}, init_vel_std={init_vel_std}")
        self.pos_std = pos_std
        self.vel_std = vel_std
        self.meas_std = meas_std
        self.init_vel_std = init_vel_std
        self._measure = np.eye(4, 8)
        self._step_t = np.eye(8)                 # the transition's transpose: x += vx, ...
        self._step_t[4:, :4] = np.eye(4)
        self._step = self._step_t.T.copy()
        self._process_std = np.repeat([pos_std, vel_std], 4)  # per state component, times w, h, w, h, ...

    @staticmethod
    def _scale(mean: np.ndarray, components: int = 4) -> np.ndarray:
        """(N, ``components``) pixel scale per component: w, h, w, h, ... (at least one pixel)."""
        return np.maximum(mean[:, _WH[:components]], 1.0)

    def initiate(self, xyxy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New boxes at rest, with a wide velocity uncertainty."""
        z = xyxy_to_state(xyxy)
        mean = np.concatenate([z, np.zeros_like(z)], axis=1)
        s = self._scale(mean)
        std = np.concatenate([2 * self.pos_std * s, self.init_vel_std * s], axis=1)
        cov = np.zeros((len(z), 8, 8))
        idx = np.arange(8)
        cov[:, idx, idx] = std ** 2
        return mean, cov

    def predict(self, mean: np.ndarray, cov: np.ndarray, steps: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The boxes ``steps`` frames later (new arrays)."""
        if not len(mean) or steps <= 0:
            return mean.copy(), cov.copy()
        for _ in range(steps):
            q = self._scale(mean, 8) * self._process_std
            q **= 2
            mean = mean @ self._step_t
            cov = self._step @ cov @ self._step_t
            cov.reshape(len(cov), 64)[:, ::9] += q  # the diagonals (cov is a new contiguous array)
        return mean, cov

    def update(self, mean: np.ndarray, cov: np.ndarray, xyxy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Corrected means and covariances given measured boxes (N, 4) (new arrays)."""
        if not len(mean):
            return mean.copy(), cov.copy()
        z = xyxy_to_state(xyxy)
        h = self._measure
        r = (self.meas_std * self._scale(mean)) ** 2
        s = h @ cov @ h.T
        s[:, np.arange(4), np.arange(4)] += r
        pht = cov @ h.T                                       # (N, 8, 4)
        gain = np.linalg.solve(s, pht.transpose(0, 2, 1)).transpose(0, 2, 1)  # P H^T S^-1 (S symmetric)
        innovation = z - mean[:, :4]
        mean = mean + np.einsum("nij,nj->ni", gain, innovation)
        cov = cov - gain @ h @ cov
        return mean, cov
