"""CTC decoding, the dictionary hook, the direction decision, and the two
OCR region models on rendered text lines."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from stages.models import DECODERS, load_adapters
from stages.models.text_direction import TextDirectionAdapter
from stages.models.text_recognition import TextRecognitionAdapter, ctc_greedy, dictionary_from_metadata

SYMBOLS = ["<blank>", "a", "b", "c", " "]


def _probs(path: list[int], peak: float = 0.9) -> np.ndarray:
    p = np.full((len(path), len(SYMBOLS)), (1 - peak) / (len(SYMBOLS) - 1), np.float32)
    p[np.arange(len(path)), path] = peak
    return p


def test_registered() -> None:
    load_adapters()
    assert DECODERS["text_recognition"] is TextRecognitionAdapter
    assert DECODERS["text_direction"] is TextDirectionAdapter


def test_ctc_collapses_repeats_and_drops_blanks() -> None:
    assert ctc_greedy(_probs([0, 1, 1, 0, 1, 2, 2, 0]), SYMBOLS)[0] == "aab"
    assert ctc_greedy(_probs([1, 4, 4, 2, 0, 0, 3]), SYMBOLS)[0] == "a bc"
    assert ctc_greedy(_probs([3, 3, 3]), SYMBOLS)[0] == "c"


def test_ctc_score_is_mean_over_kept_steps() -> None:
    p = _probs([0, 1, 1, 2])
    p[1, 1], p[2, 1], p[3, 2] = 0.6, 0.99, 0.8   # the repeat (0.99) is merged away
    text, score = ctc_greedy(p, SYMBOLS)
    assert text == "ab" and score == pytest.approx(0.7)


def test_ctc_nothing_kept() -> None:
    assert ctc_greedy(_probs([0, 0, 0]), SYMBOLS) == ("", 0.0)
    assert ctc_greedy(np.zeros((0, 5), np.float32), SYMBOLS) == ("", 0.0)


def test_dictionary_from_metadata() -> None:
    assert dictionary_from_metadata("a\nb\nc") == SYMBOLS


def test_decode_needs_bound_dictionary() -> None:
    adapter = TextRecognitionAdapter()
    out = _probs([1, 0, 2])[None]
    with pytest.raises(RuntimeError, match="bind_model"):
        adapter.decode([out], None)
    with pytest.raises(ValueError, match="character"):
        adapter.bind_model(SimpleNamespace(metadata={}, path="rec.onnx"))
    adapter.bind_model(SimpleNamespace(metadata={"character": "a\nb\nc"}, path="rec.onnx"))
    assert adapter.decode([out], None)[0] == "ab"
    with pytest.raises(ValueError, match="classes"):
        adapter.decode([np.zeros((1, 3, 7), np.float32)], None)


@pytest.mark.parametrize("probs, expected", [
    ([0.05, 0.95], (180, 0.95)),
    ([0.15, 0.85], (0, 0.15)),     # 180 is likelier but below the 0.9 threshold
    ([0.97, 0.03], (0, 0.97)),
])
def test_direction_threshold(probs: list[float], expected: tuple[int, float]) -> None:
    angle, score = TextDirectionAdapter().decode([np.array([probs], np.float32)], None)
    assert angle == expected[0] and score == pytest.approx(expected[1])


def _line_frame(text: str, upside_down: bool) -> Frame:
    img = np.full((120, 520, 3), (235, 235, 235), np.uint8)
    cv2.putText(img, text, (20, 75), cv2.FONT_HERSHEY_SIMPLEX, 1.4, (30, 30, 30), 3, cv2.LINE_AA)
    if upside_down:
        img = np.ascontiguousarray(img[::-1, ::-1])
    frame = Frame.from_image(img)
    quad = np.array([[10, 25], [510, 25], [510, 95], [10, 95]], np.float32)
    frame.detections = Detections(xyxy=[[10, 25, 510, 95]], score=[0.9], label=["text"], keypoints=[quad])
    return frame


@pytest.mark.parametrize("upside_down", [False, True])
def test_reads_a_rendered_line(models_dir, upside_down: bool) -> None:
    from stages.classify import Classify

    frame = _line_frame("Sale $12.99", upside_down)
    with Classify(on=["text"], decoder="text_direction", model="ppocr/ch_ppocr_mobile_v2.0_cls_infer") as cls, \
            Classify(on=["text"], decoder="text_recognition", model="ppocr/ch_PP-OCRv4_rec_infer") as rec:
        frame = rec(cls(frame))
    attrs = frame.detections.attributes[0]
    assert attrs["angle"] == (180 if upside_down else 0)
    assert attrs["text"].replace(" ", "") == "Sale$12.99"
    assert 0.8 < attrs["text_score"] <= 1.0
