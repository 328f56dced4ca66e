"""Model adapters: everything that is specific to one model family.

An adapter says how the engine must normalise the input (:class:`InputSpec`),
whether the image is letterboxed (aspect ratio kept, zero padding) or
stretched, and how raw output arrays turn into results.  Detector adapters
return :class:`Detections` in *model-input pixels* (0..W, 0..H of the model's
input tensor); the detect stage maps them back to source pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import cv2
import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections
from pipeline.resize_match import resize_like_engine

__all__ = ["DetectorAdapter", "DECODERS", "register", "Letterbox"]


class DetectorAdapter:
    """Turns the outputs of one detector model into detections.

    ``input_spec``: normalisation baked into the engine.
    ``letterbox``: keep the aspect ratio and pad (True) or stretch (False).
    ``letterbox_align``: where a letterboxed image sits, ``"center"`` or ``"top_left"``.
    ``pad_value``: value of the padding pixels (0..255, every channel), on the host and
    in the engine's letterbox alike.
    ``decode(outputs, input_hw)``: outputs in the compiled model's output order,
    (height, width) of the model input; returns Detections in model-input pixels.
    The output arrays are views into request buffers: copy what you keep.
    """

    input_spec: ClassVar[InputSpec] = InputSpec()
    letterbox: ClassVar[bool] = True
    letterbox_align: ClassVar[str] = "center"
    pad_value: ClassVar[int] = 0
    #: the detect stage's ``resize`` when the stage does not set it: where this family's
    #: reference implementation scales ("engine": inside the compiled model, "host", or "auto")
    resize_preference: ClassVar[str] = "auto"
    #: host scaling from the full-size BGR frame with OpenCV (as the reference does) rather
    #: than from the decoder's planes
    host_from_image: ClassVar[bool] = False

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        raise NotImplementedError

    @classmethod
    def output_problem(cls, shapes: list[tuple[int, ...]]) -> str | None:
        """Why a model with outputs of ``shapes`` (in the model's order, -1 where dynamic) cannot
        be decoded by this family, in a few words naming the layout it reads; None when they fit
        or the family cannot tell before it sees outputs.  Checked when the model is loaded."""
        return None

    def prepare_input(self, frame: Any, input_hw: tuple[int, int]) -> "tuple[np.ndarray, Letterbox] | None":
        """Optional: build the model input (H, W, 3) uint8 in ``input_spec.host_color``
        order and its coordinate mapping; None lets the detect stage letterbox with
        :meth:`Frame.resized`.  Adapters whose reference samples pixels differently
        (e.g. MediaPipe's corner-aligned warp) override this."""
        return None

    def host_input(self, frame: Any, input_hw: tuple[int, int],
                   like_engine: bool = False) -> "tuple[np.ndarray, Letterbox]":
        """The model input (H, W, 3) uint8 in ``input_spec.host_color`` order and its
        mapping: :meth:`prepare_input` if the adapter has one, else the frame scaled
        with :meth:`Frame.resized` into a letterbox (or stretched) and padded with
        ``pad_value``.  ``like_engine``: the full-size BGR frame scaled to the pixels
        OpenVINO's resize would give (:func:`pipeline.resize_match.resize_like_engine`;
        ValueError where the sizes do not allow it).  The detect stage, the benchmark
        baselines and ``vapipe quantize`` all build inputs here."""
        prepared = self.prepare_input(frame, input_hw)
        if prepared is not None:
            return prepared
        h, w = input_hw
        if self.host_from_image:
            frame.image()  # Frame.resized then scales the converted frame with cv2.resize
        box = Letterbox.fit((frame.width, frame.height), (w, h), self.letterbox, self.letterbox_align)
        fmt = "rgb24" if self.input_spec.host_color == "RGB" else "bgr24"
        if like_engine:
            inner = resize_like_engine(frame.image(), box.inner)
            if fmt == "rgb24":
                inner = cv2.cvtColor(inner, cv2.COLOR_BGR2RGB)
        else:
            inner = frame.resized(box.inner[0], box.inner[1], fmt)
        if box.inner == (w, h):
            return inner, box
        image = np.full((h, w, 3), self.pad_value, np.uint8)
        image[int(box.pad_y):int(box.pad_y) + inner.shape[0], int(box.pad_x):int(box.pad_x) + inner.shape[1]] = inner
        return image, box


DECODERS: dict[str, Callable[..., Any]] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make an adapter available under ``name`` in YAML."""

    def wrap(cls: type) -> type:
        DECODERS[name] = cls
        return cls

    return wrap


@dataclass(frozen=True)
class Letterbox:
    """Maps between source pixels and model-input pixels.

    Source (w, h) is scaled by ``scale`` and placed at (pad_x, pad_y) inside
    the model input; ``inner`` is the (width, height) of the scaled image.
    A letterbox keeps the aspect ratio: the scaled size is the source size times
    ``min(dst / src)`` rounded to whole pixels, placed in the centre (padding split
    with the odd pixel at the bottom/right, as Ultralytics and model_api do) or at
    the top-left corner (YOLOX, model_api's ``fit_to_window``).
    """

    scale_x: float
    scale_y: float
    pad_x: float
    pad_y: float
    inner: tuple[int, int]

    @classmethod
    def fit(cls, src_wh: tuple[int, int], dst_wh: tuple[int, int], keep_aspect: bool,
            align: str = "center") -> "Letterbox":
        sw, sh = src_wh
        dw, dh = dst_wh
        if not keep_aspect:
            return cls(dw / sw, dh / sh, 0, 0, (dw, dh))
        if align not in ("center", "top_left"):
            raise ValueError(f"unknown letterbox alignment {align!r}; valid: center, top_left")
        s = min(dw / sw, dh / sh)
        iw, ih = max(1, min(dw, round(sw * s))), max(1, min(dh, round(sh * s)))
        if align == "top_left":
            return cls(iw / sw, ih / sh, 0, 0, (iw, ih))
        return cls(iw / sw, ih / sh, (dw - iw) // 2, (dh - ih) // 2, (iw, ih))

    def to_source(self, points: np.ndarray) -> np.ndarray:
        """(..., 2) model-input pixels -> source pixels."""
        pts = np.asarray(points, np.float32).copy()
        pts[..., 0] = (pts[..., 0] - self.pad_x) / self.scale_x
        pts[..., 1] = (pts[..., 1] - self.pad_y) / self.scale_y
        return pts

    def detections_to_source(self, dets: Detections, src_wh: tuple[int, int]) -> Detections:
        if not len(dets):
            return dets
        xyxy = self.to_source(dets.xyxy.reshape(-1, 2, 2)).reshape(-1, 4)
        w, h = src_wh
        xyxy[:, [0, 2]] = xyxy[:, [0, 2]].clip(0, w)
        xyxy[:, [1, 3]] = xyxy[:, [1, 3]].clip(0, h)
        kps = [None if k is None else self.to_source(k) for k in dets.keypoints]
        return Detections(xyxy=xyxy, score=dets.score, label=dets.label, track_id=dets.track_id,
                          keypoints=kps, attributes=dets.attributes, class_id=dets.class_id)


class RoiAdapter:
    """A model run on regions of interest (one crop per object).

    ``input_spec``: normalisation baked into the engine (``size`` set for
    dynamic models; width -1 keeps the width dynamic, e.g. text recognition).
    ``prepare(frame, dets, i, input_hw)`` returns the uint8 crop (H, W, 3) in
    ``input_spec.host_color`` order and a context object for ``decode``.
    ``decode(outputs, context)`` turns output views into a result (copy what
    you keep).  ``apply(dets, i, result)`` writes the result into object i
    (``dets.attributes[i]``, ``dets.keypoints[i]``).
    """

    input_spec: ClassVar[InputSpec] = InputSpec()
    #: False if ``prepare`` cuts crops with ``Frame.warped``/``resized`` (no full-size conversion)
    needs_image: ClassVar[bool] = True

    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        raise NotImplementedError

    def decode(self, outputs: list[np.ndarray], context: Any) -> Any:
        raise NotImplementedError

    def apply(self, dets: Detections, i: int, result: Any) -> None:
        raise NotImplementedError

    def carry(self, result: Any, old_box: np.ndarray, new_box: np.ndarray) -> Any:
        """``result`` of an earlier frame for the object now at ``new_box`` (it was computed at
        ``old_box``), when the model does not run again (``classify.reclassify``).  Default: the
        same result (labels, attributes); adapters whose results are positions move them."""
        return result
