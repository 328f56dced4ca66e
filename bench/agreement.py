"""Whether the modes did the same work: the objects each found on the same frames
(against vapipe's), and for text with a known ground truth, how many lines each read.

Reading accuracy (``--truth``): a ground-truth line counts as read when the recorded
object that overlaps it best (box IoU >= 0.3) carries its text; ``read`` compares
with all whitespace removed (PP-OCR's recogniser drops or inserts spaces between
words depending on the spacing of the face, which is not a reading error), ``exact``
compares the strings as they are.  Case, digits and punctuation must match in both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from pipeline.records import box_iou, compare_records

__all__ = ["max_objects", "landmark_records", "read_truth", "text_accuracy", "evaluate", "TRUTH_MIN_IOU"]

TRUTH_MIN_IOU = 0.3


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def max_objects(path: str | Path) -> int:
    """The most objects any recorded frame of ``path`` (a records file) has; 0 if none."""
    return max((len(r["objects"]) for r in _load(Path(path)).values()), default=0)


def landmark_records(records: dict[str, Any]) -> dict[str, Any]:
    """The frames whose objects all carry landmarks, each box replaced by its landmarks'
    bounding box (to match objects with a peer that reports no detector box)."""
    out = {}
    for k, r in records.items():
        objs = r["objects"]
        if objs and all(o.get("landmarks") is not None for o in objs):
            out[k] = {"objects": [{**o, "box": [*np.min(o["landmarks"], axis=0), *np.max(o["landmarks"], axis=0)]}
                                  for o in objs]}
    return out


def read_truth(path: str | Path) -> list[list[dict[str, Any]]]:
    """Ground truth written with a clip: per frame, its text lines ``{"text", "box"}``."""
    try:
        data = json.loads(Path(path).read_text())
        return [list(lines) for lines in data["frames"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--truth {path}: not a ground-truth file ({type(exc).__name__}: {exc}); expected JSON "
                         '{"frames": [[{"text": ..., "box": [x1, y1, x2, y2]}, ...], ...]}') from None


def _squash(text: str) -> str:
    return "".join(text.split())


def text_accuracy(records: dict[str, Any], truth: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Lines of ``truth`` read in ``records`` (frame ``seq`` of a looping source is truth
    frame ``seq % len(truth)``): lines, read, exact, and their fractions."""
    lines = read = exact = 0
    for key, rec in records.items():
        gt = truth[int(key) % len(truth)] if truth else []
        objs = [o for o in rec["objects"] if o.get("text") is not None]
        boxes = np.array([o["box"] for o in objs], float).reshape(-1, 4)
        for line in gt:
            lines += 1
            if not objs:
                continue
            ious = box_iou(np.array([line["box"]], float), boxes)[0]
            best = int(np.argmax(ious))
            if ious[best] < TRUTH_MIN_IOU:
                continue
            got = objs[best]["text"]
            read += _squash(got) == _squash(line["text"])
            exact += got == line["text"]
    return {"frames": len(records), "lines": lines, "read": read, "exact": exact,
            "accuracy": round(read / lines, 4) if lines else None,
            "exact_accuracy": round(exact / lines, 4) if lines else None}


def evaluate(folder: str | Path, modes: Sequence[str], truth: str | Path | None = None) -> dict[str, Any]:
    """``{"agreement": {"MODE vs vapipe": ...}, "accuracy": {MODE: ...}}`` from the records
    the modes wrote into ``folder`` (vapipe's records are the reference)."""
    from .peers.registry import PEERS

    folder = Path(folder)
    records = {m: _load(folder / f"{m}.json") for m in modes if (folder / f"{m}.json").is_file()}
    out: dict[str, Any] = {}
    ref = records.get("vapipe")
    if ref is not None:
        agree = {}
        for mode, other in records.items():
            if mode == "vapipe":
                continue
            if mode in PEERS and PEERS[mode].match_on == "landmarks":
                agree[f"{mode} vs vapipe"] = compare_records(landmark_records(ref), landmark_records(other))
            else:
                agree[f"{mode} vs vapipe"] = compare_records(ref, other)
        out["agreement"] = agree
    if truth is not None:
        gt = read_truth(truth)
        out["accuracy"] = {m: text_accuracy(r, gt) for m, r in records.items()}
    return out
