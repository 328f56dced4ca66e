"""SSD anchor grids (as MediaPipe's SSD anchor generator lays them out) and box decoding.

Anchors are returned as a (N, 4) float32 array of ``[x_center, y_center, w, h]``
normalised to the model input (0..1).  Layers with the same stride share one
grid; at each cell the anchors of all those layers follow each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["SsdAnchorConfig", "generate_anchors", "decode_ssd", "sigmoid_scores", "indices_above", "split_outputs",
           "FACE_SHORT_RANGE", "POSE_DETECTION"]


@dataclass(frozen=True)
class SsdAnchorConfig:
    """Options of the anchor generator (names follow MediaPipe's options)."""

    input_size_height: int
    input_size_width: int
    strides: tuple[int, ...]
    min_scale: float = 0.1484375
    max_scale: float = 0.75
    anchor_offset_x: float = 0.5
    anchor_offset_y: float = 0.5
    aspect_ratios: tuple[float, ...] = (1.0,)
    interpolated_scale_aspect_ratio: float = 1.0
    reduce_boxes_in_lowest_layer: bool = False
    fixed_anchor_size: bool = True

    @property
    def num_layers(self) -> int:
        return len(self.strides)


def _scale(cfg: SsdAnchorConfig, index: int) -> float:
    n = cfg.num_layers
    if n == 1:
        return (cfg.min_scale + cfg.max_scale) * 0.5
    return cfg.min_scale + (cfg.max_scale - cfg.min_scale) * index / (n - 1.0)


def _layer_shapes(cfg: SsdAnchorConfig, first: int, last: int) -> tuple[list[float], list[float]]:
    """Anchor (widths, heights) per grid cell for layers first..last-1 (one stride)."""
    ratios: list[float] = []
    scales: list[float] = []
    for layer in range(first, last):
        scale = _scale(cfg, layer)
        if layer == 0 and cfg.reduce_boxes_in_lowest_layer:
            ratios += [1.0, 2.0, 0.5]
            scales += [0.1, scale, scale]
            continue
        for ratio in cfg.aspect_ratios:
            ratios.append(ratio)
            scales.append(scale)
        if cfg.interpolated_scale_aspect_ratio > 0.0:
            nxt = 1.0 if layer == cfg.num_layers - 1 else _scale(cfg, layer + 1)
            scales.append(math.sqrt(scale * nxt))
            ratios.append(cfg.interpolated_scale_aspect_ratio)
    widths = [s * math.sqrt(r) for s, r in zip(scales, ratios)]
    heights = [s / math.sqrt(r) for s, r in zip(scales, ratios)]
    return widths, heights


@lru_cache(maxsize=16)
def _anchors_cached(cfg: SsdAnchorConfig) -> np.ndarray:
    parts: list[np.ndarray] = []
    layer = 0
    while layer < cfg.num_layers:
        last = layer
        while last < cfg.num_layers and cfg.strides[last] == cfg.strides[layer]:
            last += 1
        widths, heights = _layer_shapes(cfg, layer, last)
        stride = cfg.strides[layer]
        fh = math.ceil(cfg.input_size_height / stride)
        fw = math.ceil(cfg.input_size_width / stride)
        k = len(widths)
        ys, xs = np.meshgrid(np.arange(fh, dtype=np.float64), np.arange(fw, dtype=np.float64), indexing="ij")
        xc = np.repeat(((xs + cfg.anchor_offset_x) / fw).reshape(-1), k)
        yc = np.repeat(((ys + cfg.anchor_offset_y) / fh).reshape(-1), k)
        if cfg.fixed_anchor_size:
            w = np.ones_like(xc)
            h = np.ones_like(yc)
        else:
            w = np.tile(np.asarray(widths), fh * fw)
            h = np.tile(np.asarray(heights), fh * fw)
        parts.append(np.stack([xc, yc, w, h], axis=1))
        layer = last
    out = np.concatenate(parts).astype(np.float32)
    out.flags.writeable = False
    return out


def generate_anchors(cfg: SsdAnchorConfig) -> np.ndarray:
    """(N, 4) float32 ``[x_center, y_center, w, h]`` normalised; cached per config (read-only)."""
    return _anchors_cached(cfg)


# face_detection_short_range graph: 4 layers, strides 8/16/16/16 -> 896 anchors.
FACE_SHORT_RANGE = SsdAnchorConfig(input_size_height=128, input_size_width=128, strides=(8, 16, 16, 16))
# pose_detection graph: 5 layers, strides 8/16/32/32/32 -> 2254 anchors.
POSE_DETECTION = SsdAnchorConfig(input_size_height=224, input_size_width=224, strides=(8, 16, 32, 32, 32))


def decode_ssd(raw: np.ndarray, anchors: np.ndarray, scales: tuple[float, float, float, float],
               num_keypoints: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Decode SSD regressors (x, y, w, h order, then keypoint x, y pairs).

    raw: (N, 4 + 2K) regressor values; anchors: (N, 4) from :func:`generate_anchors`;
    scales: (x_scale, y_scale, w_scale, h_scale).  Returns boxes (N, 4)
    ``[x1, y1, x2, y2]`` and keypoints (N, K, 2), both in model-input pixels.
    """
    raw = np.asarray(raw, np.float32).reshape(len(anchors), -1)
    xs, ys, ws, hs = scales
    in_h, in_w = input_hw
    size = np.array([in_w, in_h], np.float32)
    # one pass over (N, 2) pairs each: centre, half size, keypoints
    wh = anchors[:, 2:4]
    centre = (raw[:, 0:2] / np.array([xs, ys], np.float32) * wh + anchors[:, 0:2])
    half = raw[:, 2:4] / np.array([ws, hs], np.float32) * wh / 2
    boxes = np.concatenate([centre - half, centre + half], axis=1) * np.tile(size, 2)
    kp = raw[:, 4:4 + 2 * num_keypoints].reshape(-1, num_keypoints, 2)
    kp = (kp / np.array([xs, ys], np.float32) * wh[:, None, :] + anchors[:, None, 0:2]) * size
    return boxes.astype(np.float32), kp.astype(np.float32)


def indices_above(logits: np.ndarray, threshold: float, clip: float = 100.0) -> np.ndarray:
    """Indices of the logits whose :func:`sigmoid_scores` reach ``threshold``, found on the
    logits themselves (the sigmoid is monotonic), so only those need a sigmoid."""
    x = np.asarray(logits).reshape(-1)
    if threshold <= 0.0:
        return np.arange(len(x))
    if threshold >= 1.0:
        return np.flatnonzero(sigmoid_scores(x, clip) >= threshold)
    cut = math.log(threshold / (1.0 - threshold))
    if cut > clip:
        return np.zeros((0,), np.int64)
    # a small margin, then the exact test on the few candidates (float32 rounding at the cut)
    near = np.flatnonzero(x >= cut - 1e-3)
    return near[sigmoid_scores(x[near], clip) >= threshold]


def sigmoid_scores(logits: np.ndarray, clip: float = 100.0) -> np.ndarray:
    """Scores from raw logits (N,) as MediaPipe does: clip to +-clip, then sigmoid."""
    x = np.minimum(np.maximum(np.asarray(logits, np.float64).reshape(-1), -clip), clip)  # np.clip's wrapper costs more
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def split_outputs(outputs: list[np.ndarray], num_coords: int) -> tuple[np.ndarray, np.ndarray]:
    """(regressors (N, num_coords), logits (N,)) picked by shape, whatever the output order."""
    reg = logits = None
    for out in outputs:
        arr = np.asarray(out)
        if arr.shape[-1] == num_coords and arr.size > 0:
            reg = arr.reshape(-1, num_coords)
        elif arr.shape[-1] == 1:
            logits = arr.reshape(-1)
    if reg is None or logits is None or len(reg) != len(logits):
        shapes = [tuple(np.asarray(o).shape) for o in outputs]
        raise ValueError(f"expected outputs (1, N, {num_coords}) and (1, N, 1), got {shapes}")
    return reg, logits
