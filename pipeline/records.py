"""Per-frame object records of two runs on the same frames, and how well they agree.

A record set maps a frame key (``str(seq)``) to ``{"objects": [object, ...]}``.  An
object has ``box`` ``[x1, y1, x2, y2]`` in source pixels and, optionally, ``score``,
``label``, ``landmarks`` (``[[x, y], ...]``, source pixels) and ``text``.  The
benchmark writes one record set per mode and ``vapipe quantize`` one per precision;
:func:`compare_records` says whether two of them found the same objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["box_iou", "compare_records"]


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (N, 4) with every box of ``b`` (M, 4), xyxy: (N, M)."""
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def compare_records(ref: dict[str, Any], other: dict[str, Any], min_iou: float = 0.5) -> dict[str, Any]:
    """How well ``other``'s objects match ``ref``'s on the frames both recorded.

    Objects are matched one to one per frame, best IoU first, at IoU >= ``min_iou``.
    Returns frames, objects_ref, objects, matched, mean_iou and min_iou of the
    matches; ``landmarks_mean_abs_px`` when matched objects both carry landmarks
    (mean absolute coordinate difference); ``texts`` and ``texts_equal`` when both
    carry text.
    """
    frames = sorted(set(ref) & set(other), key=int)
    n_ref = n_other = matched = texts = texts_equal = 0
    ious: list[float] = []
    lm_err: list[float] = []
    for k in frames:
        a = ref[k]["objects"]
        b = other[k]["objects"]
        n_ref += len(a)
        n_other += len(b)
        if not a or not b:
            continue
        m = box_iou(np.array([o["box"] for o in a], float), np.array([o["box"] for o in b], float))
        free = np.ones(len(b), bool)
        for i in np.argsort(-m.max(axis=1)):
            row = np.where(free, m[i], -1.0)
            j = int(np.argmax(row))
            if row[j] < min_iou:
                continue
            free[j] = False
            matched += 1
            ious.append(float(m[i, j]))
            la, lb = a[i].get("landmarks"), b[j].get("landmarks")
            if la is not None and lb is not None:
                lm_err.append(float(np.abs(np.asarray(la) - np.asarray(lb)).mean()))
            if a[i].get("text") is not None and b[j].get("text") is not None:
                texts += 1
                texts_equal += a[i]["text"] == b[j]["text"]
    out: dict[str, Any] = {"frames": len(frames), "objects_ref": n_ref, "objects": n_other, "matched": matched,
                           "mean_iou": round(float(np.mean(ious)), 4) if ious else None,
                           "min_iou": round(float(np.min(ious)), 4) if ious else None}
    if lm_err:
        out["landmarks_mean_abs_px"] = round(float(np.mean(lm_err)), 3)
    if texts:
        out["texts"] = texts
        out["texts_equal"] = texts_equal
    return out
