"""End-to-end OCR on synthetic ticker frames: DB detection, direction, recognition.

Ground truth comes from ``TickerScene``: every text line fully inside the frame.
A line counts as read when the recognised object that overlaps it best
(box IoU >= 0.3) carries exactly its text, compared with all whitespace
removed: PP-OCR's recogniser drops or inserts spaces between words depending
on the spacing of the face, which is not a reading error.  Case, digits and
punctuation must match exactly.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from pipeline.frame import Frame
from stages.testsrc import BarsScene, NoiseScene, TickerScene

SEEDS = range(101, 109)          # 8 scenes ...
FRAMES_PER_SEED = 5              # ... x 5 frames = 40 frames
FRAME_STEP = 20                  # frames apart within a scene
MIN_ACCURACY = 0.95


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _squash(text: str) -> str:
    return "".join(text.split())


@pytest.fixture(scope="module")
def ocr(models_dir):
    from stages.classify import Classify
    from stages.detect import Detect

    stages = [Detect(model="ppocr/ch_PP-OCRv4_det_infer", decoder="db_text"),
              Classify(on=["text"], decoder="text_direction", model="ppocr/ch_ppocr_mobile_v2.0_cls_infer",
                       max_objects=64),
              Classify(on=["text"], decoder="text_recognition", model="ppocr/ch_PP-OCRv4_rec_infer",
                       max_objects=64)]
    for stage in stages:
        stage.ensure_open()

    def run(image: np.ndarray) -> Frame:
        frame = Frame.from_image(image)
        for stage in stages:
            frame = stage(frame)
        return frame

    yield run
    for stage in stages:
        stage.close()


def test_reads_ticker_lines(ocr) -> None:
    total = exact = squashed = 0
    misses: list[tuple[str, str]] = []
    seconds: list[float] = []
    for seed in SEEDS:
        scene = TickerScene(seed=seed)
        for k in range(FRAMES_PER_SEED):
            image, lines = scene.render(k * FRAME_STEP)
            t0 = time.perf_counter()
            dets = ocr(image).detections
            seconds.append(time.perf_counter() - t0)
            assert set(dets.label) <= {"text"}
            for line in lines:
                total += 1
                box = np.asarray(line.box)
                ious = [_iou(box, d) for d in dets.xyxy]
                best = int(np.argmax(ious)) if ious else -1
                got = dets.attributes[best].get("text", "") if best >= 0 and ious[best] >= 0.3 else None
                exact += got == line.text
                if got is not None and _squash(got) == _squash(line.text):
                    squashed += 1
                else:
                    misses.append((line.text, got))
    accuracy = squashed / total
    print(f"\nOCR on {len(seconds)} ticker frames: {squashed}/{total} lines read = {accuracy:.1%} "
          f"(exact including spaces {exact / total:.1%}); median {np.median(seconds[1:]) * 1000:.0f} ms/frame; "
          f"misses: {misses[:10]}")
    assert total >= 300
    assert accuracy >= MIN_ACCURACY, f"read {accuracy:.1%} of {total} lines; misses: {misses[:20]}"
    assert exact / total >= MIN_ACCURACY, f"exact (with spaces) {exact / total:.1%} of {total} lines"


@pytest.mark.parametrize("scene", [BarsScene(seed=1), NoiseScene(seed=2), NoiseScene(640, 480, seed=3)],
                         ids=["bars", "noise", "noise-640"])
def test_no_text_no_objects(ocr, scene) -> None:
    for seq in (0, 13, 50):
        dets = ocr(scene.render(seq)[0]).detections
        assert len(dets) == 0, f"found {len(dets)} text objects in a frame without text"
