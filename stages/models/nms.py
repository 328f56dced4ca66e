"""Non-maximum suppression: plain (greedy) and weighted (MediaPipe style).

Boxes are (N, 4) ``[x1, y1, x2, y2]`` in any consistent unit; overlap is
intersection over union.  A box is suppressed when its IoU with a kept box
is strictly greater than ``iou_threshold``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["iou_matrix", "nms", "weighted_nms", "WeightedResult", "batched_nms"]


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU between boxes ``a`` (N, 4) and ``b`` (M, 4); 0 where a union is empty."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.maximum(iw, 0.0) * np.maximum(ih, 0.0)  # np.maximum: np.clip's wrapper costs several times more
    area_a = np.maximum(a[:, 2] - a[:, 0], 0.0) * np.maximum(a[:, 3] - a[:, 1], 0.0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, max_out: int | None = None) -> np.ndarray:
    """Greedy NMS; indices (int64) of kept boxes, highest score first."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    if len(order) == 0:
        return np.zeros((0,), np.int64)
    iou = iou_matrix(boxes[order], boxes[order])
    alive = np.ones(len(order), bool)
    keep: list[int] = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(i)
        if max_out is not None and len(keep) >= max_out:
            break
        alive &= ~(iou[i] > iou_threshold)
    return order[np.asarray(keep, np.int64)]


class WeightedResult(NamedTuple):
    """Merged clusters, highest score first.

    boxes (M, 4) score-weighted mean corners; scores (M,) score of each cluster's
    best box; keypoints (M, K, 2) score-weighted means or None; index (M,) index
    of each cluster's best box in the input.
    """

    boxes: np.ndarray
    scores: np.ndarray
    keypoints: np.ndarray | None
    index: np.ndarray


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
                 keypoints: np.ndarray | None = None, max_out: int | None = None) -> WeightedResult:
    """MediaPipe's WEIGHTED suppression.

    Repeatedly takes the best remaining box; every remaining box whose IoU with
    it exceeds ``iou_threshold`` (the best box included) joins its cluster and is
    removed.  The cluster's box and keypoints are the score-weighted mean of its
    members; its score is the best box's score.
    """
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    scores = np.asarray(scores, np.float32).reshape(-1)
    order = np.argsort(-scores, kind="stable")
    ranked = boxes[order]  # everything below in score order
    ranked_kps = None if keypoints is None else _as_keypoints(keypoints, len(boxes))[order]
    iou = iou_matrix(ranked, ranked)
    s = scores[order].astype(np.float64)
    remaining = np.ones(len(order), bool)
    out_boxes: list[np.ndarray] = []
    out_kps: list[np.ndarray] = []
    out_idx: list[int] = []
    for i in range(len(order)):
        if not remaining[i]:
            continue
        members = remaining & (iou[i] > iou_threshold)
        members[i] = True  # a degenerate (zero-area) box still forms its own cluster
        remaining &= ~members
        w = s[members]
        total = w.sum()
        if total > 0:
            out_boxes.append((ranked[members] * w[:, None]).sum(0) / total)
            if ranked_kps is not None:
                out_kps.append((ranked_kps[members] * w[:, None, None]).sum(0) / total)
        else:
            out_boxes.append(ranked[i])
            if ranked_kps is not None:
                out_kps.append(ranked_kps[i])
        out_idx.append(int(order[i]))
        if max_out is not None and len(out_idx) >= max_out:
            break
    idx = np.asarray(out_idx, np.int64)
    return WeightedResult(
        boxes=np.asarray(out_boxes, np.float32).reshape(-1, 4),
        scores=scores[idx],
        keypoints=None if ranked_kps is None else np.asarray(out_kps, np.float32).reshape(len(out_kps), ranked_kps.shape[1], 2),
        index=idx,
    )


def _as_keypoints(keypoints: np.ndarray, n: int) -> np.ndarray:
    """Keypoints of ``n`` boxes, (n, K, 2) or (n, 2K), as (n, K, 2) float32."""
    kps = np.asarray(keypoints, np.float32)
    if kps.ndim == 3:
        return kps
    if n == 0:  # reshape cannot infer K from an empty array
        return np.zeros((0, kps.shape[-1] // 2 if kps.ndim == 2 else 0, 2), np.float32)
    return kps.reshape(n, -1, 2)


def batched_nms(boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, iou_threshold: float,
                agnostic: bool = False, max_out: int | None = None, max_candidates: int = 30000) -> np.ndarray:
    """Greedy NMS per class (or across classes with ``agnostic``), as Ultralytics and
    torchvision do it: candidates sorted by score (at most ``max_candidates``), a box is
    dropped when its IoU with a kept box of the same class is greater than ``iou_threshold``.
    Returns indices (int64) of kept boxes, highest score first, at most ``max_out``.

    Memory stays O(N): each kept box is compared with the remaining ones only.
    """
    scores = np.asarray(scores, np.float32).reshape(-1)
    order = np.argsort(-scores, kind="stable")[:max_candidates]
    if len(order) == 0:
        return np.zeros((0,), np.int64)
    b = np.asarray(boxes, np.float64).reshape(-1, 4)[order]
    if not agnostic:  # shift each class far away from the others
        span = max(float(np.abs(b).max()), 1.0) * 2.0 + 1.0
        b = b + (np.asarray(class_ids, np.float64).reshape(-1)[order] * span)[:, None]
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    area = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    alive = np.arange(len(order))
    keep: list[int] = []
    while len(alive):
        i = alive[0]
        keep.append(int(i))
        if max_out is not None and len(keep) >= max_out:
            break
        rest = alive[1:]
        iw = np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None)
        ih = np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None)
        inter = iw * ih
        union = area[i] + area[rest] - inter
        iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        alive = rest[iou <= iou_threshold]
    return order[np.asarray(keep, np.int64)]
