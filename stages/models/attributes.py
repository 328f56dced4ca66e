"""Generic attribute classifier on object crops: every output head of the model becomes
attributes of the object.

Heads (``heads:`` in the classify stage's parameters, keyed by output name or index):

* ``softmax``: one attribute ``name`` = the label of the best class, and
  ``name_score`` its probability (softmax applied unless the output already is a
  probability distribution, or as ``activation:`` says);
* ``multilabel``: one boolean attribute per label, true when its probability is at
  least ``threshold`` (0.5; sigmoid applied unless the values are already in [0, 1]);
  ``scores: true`` also writes ``label_score``;
* ``regression``: the values times ``scale`` (plus ``offset``): ``name`` for a single
  value, one attribute per label when ``labels`` are given, else a list;
* ``point``: (x, y) normalised to the crop -> ``name`` = [x, y] in the frame's pixels (a
  :class:`~pipeline.geometry.PixelPoint`, mapped with the box when a view's objects go back to
  the camera's pixels).

Labels come from the head (a list or a file) or, for a single softmax head, from the
model's rt_info ``labels``.  Without ``heads`` every output is a head: a ``Softmax``
output is a softmax head, any other a regression head, named after the output.

Crops: the object's box rounded to whole pixels and clipped to the frame, cut from the
full-size BGR frame and scaled with ``cv2.resize`` (bilinear) to the model's input:
stretched (``standard``, Open Model Zoo's convention and the default) or letterboxed;
colour order, mean, scale and padding value from the stage parameters, else rt_info, else
BGR with no scaling, padded with 0 (Open Model Zoo).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections
from pipeline.geometry import PixelPoint

from ..tracking.boxes import follow_box
from .base import Letterbox, RoiAdapter, register
from .labels import load_labels
from .model_info import ModelInfo, per_channel, setting

__all__ = ["Attributes", "Head", "crop_box"]

HEAD_TYPES = ("softmax", "multilabel", "regression", "point")
ACTIVATIONS = ("auto", "none", "softmax", "sigmoid")
_HEAD_KEYS = {"type", "name", "labels", "threshold", "scale", "offset", "activation", "scores"}


@dataclass(frozen=True)
class Head:
    """One output read as attributes (see the module docstring)."""

    output: int
    name: str
    kind: str
    size: int
    labels: tuple[str, ...] | None = None
    threshold: float = 0.5
    scale: float = 1.0
    offset: float = 0.0
    activation: str = "auto"
    scores: bool = False

    def read(self, values: np.ndarray, crop: tuple[int, int, int, int]) -> dict[str, Any]:
        v = np.asarray(values, np.float32).reshape(-1)
        if self.kind == "softmax":
            probs = _softmax(v) if _wants(self.activation, "softmax", v, distribution=True) else v
            k = int(np.argmax(probs))
            label: Any = self.labels[k] if self.labels is not None else k
            return {self.name: label, f"{self.name}_score": float(probs[k])}
        if self.kind == "multilabel":
            probs = _sigmoid(v) if _wants(self.activation, "sigmoid", v, distribution=False) else v
            assert self.labels is not None
            out: dict[str, Any] = {name: bool(p >= self.threshold) for name, p in zip(self.labels, probs)}
            if self.scores:
                out.update({f"{name}_score": float(p) for name, p in zip(self.labels, probs)})
            return out
        if self.kind == "point":
            x1, y1, x2, y2 = crop
            return {self.name: PixelPoint([float(x1 + v[0] * (x2 - x1)), float(y1 + v[1] * (y2 - y1))])}
        scaled = v * self.scale + self.offset
        if self.labels is not None:
            return {name: float(x) for name, x in zip(self.labels, scaled)}
        return {self.name: float(scaled[0]) if len(scaled) == 1 else [float(x) for x in scaled]}


def _wants(activation: str, kind: str, v: np.ndarray, distribution: bool) -> bool:
    if activation != "auto":
        return activation == kind
    in_range = bool(np.all((v >= 0) & (v <= 1)))
    if distribution:
        return not (in_range and abs(float(v.sum()) - 1.0) < 1e-3)
    return not in_range


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def crop_box(box: np.ndarray, frame_wh: tuple[int, int]) -> tuple[int, int, int, int]:
    """The crop of ``box`` [x1, y1, x2, y2] (source pixels): corners rounded to whole pixels,
    clipped to the frame, at least 1 pixel wide and high."""
    w, h = frame_wh
    x1, y1, x2, y2 = (float(v) for v in box)
    if not np.isfinite([x1, y1, x2, y2]).all():
        x1 = y1 = x2 = y2 = 0.0
    ix1 = int(min(max(round(x1), 0), w - 1))
    iy1 = int(min(max(round(y1), 0), h - 1))
    ix2 = int(min(max(round(x2), ix1 + 1), w))
    iy2 = int(min(max(round(y2), iy1 + 1), h))
    return ix1, iy1, ix2, iy2


@register("attributes")
class Attributes(RoiAdapter):
    """Attributes of each object from a classifier's output heads (module docstring)."""

    needs_image: ClassVar[bool] = True
    #: built from the model's outputs and metadata (``Attributes(info, settings, options)``)
    reads_model: ClassVar[bool] = True

    def __init__(self, info: ModelInfo, settings: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        if options:
            raise ValueError(f"decoder 'attributes' takes no options (got {', '.join(map(str, options))}); set "
                             "heads, resize_type, pad_value, reverse_input_channels, mean_values, scale_values as "
                             "stage parameters")
        self.info = info

        def pick(key: str, default: Any) -> Any:
            return setting(key, settings, info, default)

        resize = pick("resize_type", "standard")
        if resize not in ("standard", "fit_to_window", "fit_to_window_letterbox"):
            raise ValueError(f"model {info.path}: resize_type {resize!r} is not supported for crops; valid: "
                             "standard, fit_to_window, fit_to_window_letterbox")
        self.letterbox = resize != "standard"
        self.align = "top_left" if resize == "fit_to_window" else "center"
        self.pad_value = int(round(float(pick("pad_value", 0))))
        if info.dynamic:
            raise ValueError(f"model {info.path} has a dynamic input {list(info.input_hw)}; the attributes "
                             "decoder needs a model with a fixed input size")
        color = "RGB" if pick("reverse_input_channels", False) else "BGR"
        mean = per_channel(pick("mean_values", None), "mean_values", info)
        scale = per_channel(pick("scale_values", None), "scale_values", info)
        self.input_spec = InputSpec(host_color=color, model_color=color, mean=mean, scale=scale)
        self.heads = self._heads(settings.get("heads"))

    # --- heads -----------------------------------------------------------------------------------
    def _heads(self, given: dict[Any, dict[str, Any]] | None) -> tuple[Head, ...]:
        info = self.info
        names = [o.name for o in info.outputs]
        if given is None:
            return tuple(self._auto_head(i) for i in range(len(info.outputs)))
        heads = []
        for key, spec in given.items():
            where = f"model {info.path} head {key!r}"
            if str(key) in names:
                index = names.index(str(key))
            elif isinstance(key, int) and 0 <= key < len(names):
                index = key
            else:
                raise ValueError(f"{where}: no output of that name or index; outputs: "
                                 f"{', '.join(f'{i}: {n}' for i, n in enumerate(names))}")
            if not isinstance(spec, dict):
                raise ValueError(f"{where}: expected a mapping {{type, name, labels, ...}}, got {spec!r}")
            heads.append(self._head(index, spec, where))
        return tuple(heads)

    def _auto_head(self, index: int) -> Head:
        out = self.info.outputs[index]
        size = _size(out.shape)
        labels = self.info.meta.get("labels")
        if out.op == "Softmax" or (len(self.info.outputs) == 1 and labels is not None and len(labels) == size > 1):
            fits = labels is not None and len(labels) == size and len(self.info.outputs) == 1
            return Head(index, out.name, "softmax", size, tuple(labels) if fits else None)
        return Head(index, out.name, "regression", size)

    def _head(self, index: int, spec: dict[str, Any], where: str) -> Head:
        unknown = set(spec) - _HEAD_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}; valid: {', '.join(sorted(_HEAD_KEYS))}")
        out = self.info.outputs[index]
        size = _size(out.shape)
        kind = spec.get("type", "softmax")
        if kind not in HEAD_TYPES:
            raise ValueError(f"{where}: unknown type {kind!r}; valid: {', '.join(HEAD_TYPES)}")
        activation = spec.get("activation", "auto")
        if activation not in ACTIVATIONS:
            raise ValueError(f"{where}: unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        labels = None
        if spec.get("labels") is not None:
            labels = tuple(load_labels(spec["labels"], f"{where} labels"))
        elif kind == "softmax" and len(self.info.outputs) == 1 and self.info.meta.get("labels") is not None:
            labels = tuple(self.info.meta["labels"])
        if labels is not None and len(labels) != size:
            raise ValueError(f"{where}: {len(labels)} labels but output {out.name!r} {out.shape_text()} has "
                             f"{size} values")
        if kind == "multilabel" and labels is None:
            raise ValueError(f"{where}: a multilabel head needs labels (one name per value of output "
                             f"{out.name!r}, {size} values)")
        if kind == "point" and size != 2:
            raise ValueError(f"{where}: a point head reads 2 values (x, y); output {out.name!r} has {size}")
        try:
            threshold = float(spec.get("threshold", 0.5))
            scale = float(spec.get("scale", 1.0))
            offset = float(spec.get("offset", 0.0))
        except (TypeError, ValueError):
            raise ValueError(f"{where}: threshold, scale and offset must be numbers") from None
        return Head(index, str(spec.get("name", out.name)), kind, size, labels, threshold, scale, offset,
                    activation, bool(spec.get("scores", False)))

    # --- RoiAdapter ------------------------------------------------------------------------------
    def prepare(self, frame: Any, dets: Detections, i: int, input_hw: tuple[int, int]) -> tuple[np.ndarray, Any]:
        """The crop (see the module docstring) in ``input_spec.host_color`` order, and its box."""
        h, w = input_hw
        x1, y1, x2, y2 = crop = crop_box(dets.xyxy[i], (frame.width, frame.height))
        patch = frame.image()[y1:y2, x1:x2]
        box = Letterbox.fit((x2 - x1, y2 - y1), (w, h), self.letterbox, self.align)
        inner = cv2.resize(patch, box.inner, interpolation=cv2.INTER_LINEAR)
        if self.input_spec.host_color == "RGB":
            inner = cv2.cvtColor(inner, cv2.COLOR_BGR2RGB)
        if box.inner != (w, h):
            image = np.full((h, w, 3), self.pad_value, np.uint8)
            image[int(box.pad_y):int(box.pad_y) + inner.shape[0], int(box.pad_x):int(box.pad_x) + inner.shape[1]] = inner
            inner = image
        return inner, crop

    def decode(self, outputs: list[np.ndarray], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for head in self.heads:
            result.update(head.read(outputs[head.output], context))
        return result

    def carry(self, result: dict[str, Any], old_box: np.ndarray, new_box: np.ndarray) -> dict[str, Any]:
        """``result`` with its points moved and scaled with the object's box; the rest kept."""
        return {k: PixelPoint(follow_box(np.asarray([v], np.float32), old_box, new_box)[0].tolist())
                if isinstance(v, PixelPoint) else v for k, v in result.items()}

    def apply(self, dets: Detections, i: int, result: dict[str, Any]) -> None:
        dets.attributes[i].update(result)

    def describe(self) -> str:
        return "attributes: " + ", ".join(f"{h.name} ({h.kind}, output {h.output})" for h in self.heads)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= max(d, 1)
    return n
