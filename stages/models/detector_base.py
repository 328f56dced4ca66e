"""Shared part of the detector families decoded from a model's outputs and metadata
(``yolo``, ``yolov5``, ``yolox``, ``yolo_end2end``, ``ssd``).

A family says which output layouts it reads (:meth:`ModelDetector.layout`), its
default preprocessing and thresholds (:class:`FamilyDefaults`) and how one output
becomes boxes (:meth:`ModelDetector.decode`).  Everything else is here: the
preprocessing, resolved per setting as *stage parameter, else the model's metadata,
else the family default*; labels and their count check; score threshold, class
filter, NMS and the box limit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections

from .base import DetectorAdapter
from .labels import LabelsError, class_ids_for, label_name, load_labels
from .model_info import ModelInfo, per_channel, setting
from .nms import batched_nms

__all__ = ["ModelDetector", "FamilyDefaults", "Layout", "GENERIC_FAMILIES", "grid_cells"]

log = logging.getLogger("vapipe")

#: families decoded from outputs and metadata, by decoder name (filled by ``generic``)
GENERIC_FAMILIES: dict[str, type["ModelDetector"]] = {}


def generic(name: str) -> Any:
    """Class decorator: register a model-driven detector family (also as a decoder)."""
    from .base import register

    def wrap(cls: type[ModelDetector]) -> type[ModelDetector]:
        cls.family = name
        GENERIC_FAMILIES[name] = cls
        return register(name)(cls)

    return wrap


@dataclass(frozen=True)
class FamilyDefaults:
    """Preprocessing and post-processing a family's reference tool uses by default."""

    resize_type: str
    pad_value: int
    reverse_input_channels: bool
    scale_values: tuple[float, ...] | None
    threshold: float
    iou: float | None          # None: no NMS (the model did it)
    max_det: int | None
    agnostic_nms: bool = False
    mean_values: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Layout:
    """How a family reads a model: the output(s) it decodes, whether the main one is
    channels-first ([1, C, N]), and the number of classes the outputs imply (None:
    they do not say)."""

    output: int
    channels_first: bool = False
    num_classes: int | None = None
    extra: tuple[int, ...] = ()
    note: str = ""


def grid_cells(input_hw: tuple[int, int], strides: tuple[int, ...] = (8, 16, 32)) -> int | None:
    """Number of grid cells over ``strides`` for an input of (height, width); None if unknown."""
    h, w = input_hw
    if h <= 0 or w <= 0:
        return None
    return sum((h // s) * (w // s) for s in strides)


class ModelDetector(DetectorAdapter):
    """A detector family read from the model; one instance per model and settings.

    Instances carry their own ``input_spec``, ``letterbox``, ``letterbox_align`` and
    ``pad_value`` (from settings, metadata and family defaults); models with a dynamic
    input also get ``input_size(src_wh)``.
    """

    family: ClassVar[str] = ""
    defaults: ClassVar[FamilyDefaults]
    #: model_api embeds the resize and padding into the compiled model: so does vapipe by default
    resize_preference: ClassVar[str] = "engine"
    #: the family's TensorFlow Lite exports give boxes as fractions of the input (Ultralytics)
    tflite_normalized: ClassVar[bool] = False
    #: what the family's outputs look like, for messages
    layout_text: ClassVar[str] = ""

    def __init__(self, info: ModelInfo, settings: dict[str, Any], layout: Layout,
                 options: dict[str, Any] | None = None) -> None:
        self.info = info
        self.layout_used = layout
        if options:
            raise ValueError(f"decoder {self.family!r} takes no options (got {', '.join(map(str, options))}); "
                             "set threshold, iou, max_det, classes, labels, ... as stage parameters")
        meta, d = info.meta, self.defaults

        def pick(key: str, default: Any) -> Any:
            return setting(key, settings, info, default)

        resize = pick("resize_type", d.resize_type)
        if resize not in ("standard", "fit_to_window", "fit_to_window_letterbox"):
            raise ValueError(f"model {info.path}: resize_type {resize!r} ({info.origin.get('resize_type', 'set')}) "
                             "is not supported; valid: standard, fit_to_window, fit_to_window_letterbox")
        self.resize_type = str(resize)
        self.letterbox = resize != "standard"
        self.letterbox_align = "top_left" if resize == "fit_to_window" else "center"
        self.pad_value = int(round(float(pick("pad_value", d.pad_value))))
        rgb = bool(pick("reverse_input_channels", d.reverse_input_channels))
        mean = per_channel(pick("mean_values", d.mean_values), "mean_values", info)
        scale = per_channel(pick("scale_values", d.scale_values), "scale_values", info)
        color = "RGB" if rgb else "BGR"
        self._size = self._resolve_size(settings.get("input_size"))
        self.input_spec = InputSpec(host_color=color, model_color=color, mean=mean, scale=scale,
                                    size=self._size if info.dynamic else None)
        if info.dynamic and self.letterbox:
            self.input_size = self._rect_size  # per-source input size (dynamic models only)
        self.threshold = float(pick("threshold", meta.get("confidence_threshold", d.threshold)))
        self.iou = None if d.iou is None else float(pick("iou", meta.get("iou_threshold", d.iou)))
        self.max_det = settings.get("max_det") or d.max_det
        self.agnostic = bool(pick("agnostic_nms", d.agnostic_nms))
        #: Ultralytics' TensorFlow Lite exports give box coordinates as fractions of the input size
        self.normalized_boxes = self.tflite_normalized and info.path.suffix.lower() == ".tflite"
        self.labels = self._resolve_labels(settings.get("labels"))
        classes = settings.get("classes")
        where = f"classes for model {info.path}"
        ids = None if classes is None else class_ids_for(classes, self.labels, where, self.num_names() or None,
                                                         getattr(self, "_label_offset", 0))
        self.keep_classes = None if ids is None else np.asarray(ids, np.int64)
        self._names = np.array([self.name_of(i) for i in range(self.num_names())], dtype=object)

    # --- preprocessing -----------------------------------------------------------------------
    def _resolve_size(self, given: tuple[int, int] | None) -> tuple[int, int]:
        info = self.info
        if not info.dynamic:
            if given is not None and tuple(given) != tuple(info.input_hw):
                log.warning("model %s: input_size %s is not used: the model's input is fixed at %s (height, "
                            "width); export it with a dynamic input to choose", info.path, list(given),
                            list(info.input_hw))
            return info.input_hw
        size = given or info.meta.get("imgsz")
        if size is None:
            raise ValueError(f"model {info.path} has a dynamic input {list(info.input_hw)} and no imgsz in its "
                             "metadata; set input_size: [height, width]")
        h, w = info.input_hw
        return (h if h > 0 else int(size[0]), w if w > 0 else int(size[1]))

    def _rect_size(self, src_wh: tuple[int, int]) -> tuple[int, int]:
        """Input (height, width) for a source of (width, height) on a dynamic model: the
        letterbox into ``input_size`` padded only up to a multiple of the model's stride
        (Ultralytics' rectangular inference)."""
        stride = int(self.info.meta.get("stride", 32))
        h, w = self._size
        sw, sh = src_wh
        s = min(h / sh, w / sw)
        nh, nw = round(sh * s), round(sw * s)
        return (int(np.ceil(nh / stride) * stride), int(np.ceil(nw / stride) * stride))

    # --- labels --------------------------------------------------------------------------------
    def num_classes(self) -> int | None:
        """Classes the outputs imply (None if they do not say)."""
        return self.layout_used.num_classes

    def _resolve_labels(self, given: Any) -> list[str] | None:
        info = self.info
        if given is not None:
            source = f"labels file {given}" if isinstance(given, str) else "labels"
            labels = load_labels(given, source)
        elif info.meta.get("labels") is not None:
            labels = list(info.meta["labels"])
            source = f"labels of {info.origin.get('labels', info.path)}"
        else:
            return None
        self._label_offset = 0
        nc = self.num_classes()
        if nc is not None and len(labels) != nc:
            if self._background_id() == 0 and len(labels) == nc - 1:
                self._label_offset = 1  # names without the background class
            else:
                raise LabelsError(f"{source} has {len(labels)} names but model {info.path} has {nc} classes "
                                  f"(outputs {info.shapes_text()}, decoder {self.family})")
        return labels

    def _background_id(self) -> int | None:
        return None

    def num_names(self) -> int:
        nc = self.num_classes()
        if nc is not None:
            return nc
        return len(self.labels) + getattr(self, "_label_offset", 0) if self.labels else 0

    def name_of(self, class_id: int) -> str:
        if self.labels is None:
            return label_name(None, class_id)
        return label_name(self.labels, class_id - getattr(self, "_label_offset", 0))

    def _label_array(self, class_ids: np.ndarray) -> np.ndarray:
        names = self._names
        if len(class_ids) and (class_ids.min() < 0 or class_ids.max() >= len(names)):
            return np.array([self.name_of(int(c)) for c in class_ids], dtype=object)
        return names[class_ids] if len(class_ids) else np.zeros((0,), object)

    # --- post-processing -----------------------------------------------------------------------
    def finish(self, boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray,
               input_hw: tuple[int, int]) -> Detections:
        """Candidates already above the threshold (model-input pixels, or fractions of the
        (height, width) ``input_hw`` for normalised exports) -> the class filter, NMS (if the
        family does it) and the box limit, highest scores first."""
        class_ids = np.asarray(class_ids, np.int64).reshape(-1)
        if self.normalized_boxes:
            h, w = input_hw
            boxes = boxes * np.array([w, h, w, h], np.float32)
        if self.keep_classes is not None and len(class_ids):
            keep = np.isin(class_ids, self.keep_classes)
            boxes, scores, class_ids = boxes[keep], scores[keep], class_ids[keep]
        if self.iou is not None:
            idx = batched_nms(boxes, scores, class_ids, self.iou, self.agnostic, self.max_det)
        else:
            idx = np.argsort(-scores, kind="stable")[: self.max_det]
        if len(idx) == 0:
            return Detections()
        ids = class_ids[idx]
        return Detections(xyxy=boxes[idx], score=scores[idx], label=self._label_array(ids), class_id=ids)

    # --- family interface ----------------------------------------------------------------------
    @classmethod
    def layout(cls, info: ModelInfo, input_hw: tuple[int, int], options: dict[str, Any] | None = None
               ) -> Layout | None:
        """The layout this family reads in ``info``'s outputs, or None if they do not fit.
        ``input_hw`` is the input size (-1 where still unknown); ``options`` the decoder options."""
        raise NotImplementedError

    def describe(self) -> str:
        """One line: family, labels, thresholds and preprocessing (for logs)."""
        spec = self.input_spec
        return (f"{self.family}: {self.num_names() or '?'} classes, threshold {self.threshold}, "
                f"iou {self.iou}, max_det {self.max_det}, {self.resize_type} pad {self.pad_value}, "
                f"{spec.model_color}, mean {spec.mean}, scale {spec.scale}")
