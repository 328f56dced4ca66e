"""PP-OCR text-line recognition (CTC).

Model: ``ppocr/ch_PP-OCRv4_rec_infer`` - input N x 3 x 48 x W BGR (W dynamic),
``(x / 255 - 0.5) / 0.5``; output N x T x C softmax probabilities over the
dictionary, T = W / 8 time steps.  The dictionary is the model's ONNX
metadata ``character`` (one symbol per line); class 0 is the CTC blank and
the last class is a space, so C = 1 + lines + 1.

The adapter needs the dictionary before decoding: the Classify stage calls
:meth:`TextRecognitionAdapter.bind_model` with the loaded model.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from pipeline.engine import InputSpec, LoadedModel
from pipeline.frame import Detections

from .base import RoiAdapter, register
from .text_crop import REC_HEIGHT, REC_MIN_WIDTH, line_crop, rec_width, resize_pad
from .text_direction import line_quad

__all__ = ["TextRecognitionAdapter", "ctc_greedy", "dictionary_from_metadata"]

BLANK = "<blank>"


def dictionary_from_metadata(character: str) -> list[str]:
    """Class index -> symbol: the blank, the metadata's lines, then a space."""
    return [BLANK, *character.splitlines(), " "]


def ctc_greedy(probs: np.ndarray, symbols: Sequence[str]) -> tuple[str, float]:
    """Greedy CTC decoding of one line.

    probs: (T, C) class probabilities per time step, class 0 = blank.
    Takes the best class per step, merges consecutive repeats, drops blanks.
    Returns the text and the mean best-class probability over the kept steps
    (0.0 when nothing is kept).
    """
    probs = np.asarray(probs, np.float32).reshape(-1, probs.shape[-1])
    if len(probs) == 0:
        return "", 0.0
    best = probs.argmax(axis=1)
    conf = probs[np.arange(len(best)), best]
    keep = best != 0
    keep[1:] &= best[1:] != best[:-1]
    if not keep.any():
        return "", 0.0
    return "".join(symbols[k] for k in best[keep]), float(conf[keep].mean())


@register("text_recognition")
class TextRecognitionAdapter(RoiAdapter):
    """Sets ``attributes["text"]`` and ``attributes["text_score"]`` (mean
    per-character confidence, 0..1) on objects with a text quad in ``keypoints``.

    A line whose ``attributes["angle"]`` is 180 (from ``text_direction``) is
    turned upright before recognition.  The crop is scaled to height 48 and
    padded with mid-grey (normalised ~0) to at least ``min_width`` pixels;
    lines wider than ``max_width`` pixels at height 48 are squeezed to it.
    """

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="BGR", model_color="BGR",
                                                mean=(127.5, 127.5, 127.5), scale=(127.5, 127.5, 127.5),
                                                size=(REC_HEIGHT, -1))
    #: a typical line's input (height, width), for timing the model before a run
    typical_input_hw: ClassVar[tuple[int, int]] = (REC_HEIGHT, 320)

    def __init__(self, min_width: int = REC_MIN_WIDTH, max_width: int = 3200) -> None:
        self.min_width = min_width
        self.max_width = max_width
        self.symbols: list[str] | None = None

    def bind_model(self, model: LoadedModel) -> None:
        """Read the dictionary from the model's metadata (key ``character``)."""
        character = model.metadata.get("character")
        if not character:
            raise ValueError(f"recognition model {model.path} has no 'character' metadata (its dictionary)")
        self.symbols = dictionary_from_metadata(character)

    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        crop = line_crop(frame, line_quad(dets, i))
        if dets.attributes[i].get("angle") == 180:
            crop = np.ascontiguousarray(crop[::-1, ::-1])
        width = min(self.max_width, rec_width(crop.shape[:2], REC_HEIGHT, self.min_width))
        return resize_pad(crop, REC_HEIGHT, width), None  # lines wider than max_width are squeezed

    def decode(self, outputs: list[np.ndarray], context: Any) -> tuple[str, float]:
        if self.symbols is None:
            raise RuntimeError("text_recognition: dictionary not bound; call bind_model(model) after loading")
        probs = outputs[0]
        if probs.shape[-1] != len(self.symbols):
            raise ValueError(f"text_recognition: model has {probs.shape[-1]} classes but the dictionary "
                             f"gives {len(self.symbols)}")
        return ctc_greedy(probs.reshape(-1, probs.shape[-1]), self.symbols)

    def apply(self, dets: Detections, i: int, result: tuple[str, float]) -> None:
        text, score = result
        dets.attributes[i]["text"] = text
        dets.attributes[i]["text_score"] = score
