"""Helpers shared by the YOLO families: reading a [1, A, B] head output either way
round, box conversion, and the YOLOX cell grid."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .detector_base import Layout, grid_cells
from .model_info import ModelInfo, OutputInfo

__all__ = ["single_head", "head_layout", "grid_head", "xywh_to_xyxy", "rows", "cell_grid", "best_class_times_objectness",
           "STRIDES", "ULTRALYTICS_INPUT"]

STRIDES = (8, 16, 32)
#: Ultralytics' (and the YOLOv5 repository's) input: centred letterbox padded with 114, RGB / 255
ULTRALYTICS_INPUT = {"resize_type": "fit_to_window_letterbox", "pad_value": 114, "reverse_input_channels": True,
                     "scale_values": (255.0,)}


def single_head(info: ModelInfo) -> OutputInfo | None:
    """The model's only output when it is a 3-D [1, A, B] tensor, else None."""
    if len(info.outputs) != 1:
        return None
    out = info.outputs[0]
    return out if len(out.shape) == 3 and out.shape[0] in (1, -1) else None


def head_layout(out: OutputInfo, channels_first: bool, fixed: int, anchors: int | None,
                min_classes: int = 1) -> Layout | None:
    """``out`` read as [1, C, N] (``channels_first``) or [1, N, C] with C = ``fixed`` + classes.

    ``anchors``: the number of rows N the family expects for this input size (None when
    the input size is not known yet); a static N must equal it.  Without it, N must be at
    least C (heads have far more rows than channels).
    """
    a, b = out.shape[1], out.shape[2]
    c, n = (a, b) if channels_first else (b, a)
    if c < fixed + min_classes:
        return None
    if n > 0 and anchors is not None and n != anchors:
        return None
    if n > 0 and anchors is None and n < c:
        return None
    return Layout(out.index, channels_first, c - fixed)


def grid_head(info: ModelInfo, fixed: int, anchors: int | None, either_way: bool = False) -> Layout | None:
    """The model's single [1, N, fixed + classes] head (also [1, C, N] with ``either_way``,
    which is tried first), or None."""
    out = single_head(info)
    if out is None:
        return None
    first = head_layout(out, True, fixed, anchors) if either_way else None
    return first or head_layout(out, False, fixed, anchors)


def best_class_times_objectness(picked: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (K, 5+nc) of x, y, w, h, objectness, class probabilities -> (class ids, scores, mask
    of scores above ``threshold``); a row's score is objectness x its best class probability."""
    scores = picked[:, 5:] * picked[:, 4:5]
    ids = scores.argmax(axis=1)
    best = scores[np.arange(len(ids)), ids]
    return ids, best, best > threshold


def anchor_count(input_hw: tuple[int, int], per_cell: int = 1) -> int | None:
    cells = grid_cells(input_hw, STRIDES)
    return None if cells is None else cells * per_cell


def rows(output: np.ndarray, channels_first: bool) -> np.ndarray:
    """(N, C) view of a [1, C, N] or [1, N, C] output (transposed view, no copy)."""
    arr = output.reshape(output.shape[-2], output.shape[-1])
    return arr.T if channels_first else arr


def xywh_to_xyxy(xywh: np.ndarray) -> np.ndarray:
    """(K, 4) centre x, centre y, width, height -> (K, 4) x1, y1, x2, y2 (float32)."""
    xywh = np.asarray(xywh, np.float32)
    half = xywh[:, 2:4] / 2
    return np.concatenate([xywh[:, :2] - half, xywh[:, :2] + half], axis=1)


@lru_cache(maxsize=16)
def cell_grid(input_hw: tuple[int, int], strides: tuple[int, ...] = STRIDES) -> tuple[np.ndarray, np.ndarray]:
    """YOLOX's cells for an input of (height, width): (N, 2) cell (x, y) and (N, 1) stride,
    stride by stride, rows of cells top to bottom, cells left to right in a row."""
    grids, steps = [], []
    h, w = input_hw
    for s in strides:
        ys, xs = np.meshgrid(np.arange(h // s), np.arange(w // s), indexing="ij")
        grids.append(np.stack([xs.reshape(-1), ys.reshape(-1)], axis=1))
        steps.append(np.full((grids[-1].shape[0], 1), s))
    grid = np.concatenate(grids).astype(np.float32)
    stride = np.concatenate(steps).astype(np.float32)
    grid.setflags(write=False)
    stride.setflags(write=False)
    return grid, stride
