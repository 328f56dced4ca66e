"""What a model file says about itself: input and output shapes, and the settings
its exporter stored with it.

Three sources are read, most specific last (a later one wins per key):

* OpenVINO ``rt_info/model_info`` (model_api's convention, which Ultralytics' OpenVINO
  export also writes): ``model_type``, ``labels``, ``resize_type``, ``pad_value``,
  ``reverse_input_channels``, ``mean_values``, ``scale_values``, ``iou_threshold``,
  ``confidence_threshold``;
* ONNX ``metadata_props`` (Ultralytics' ONNX export): ``names`` (a Python dict literal,
  parsed with :func:`ast.literal_eval`), ``imgsz``, ``stride``, ``task``, ``end2end``;
* Ultralytics' ``metadata.yaml`` beside an IR: ``names``, ``imgsz``, ``stride``, ``task``,
  ``args.nms``, ``end2end``.

Ultralytics writes label names into rt_info with ``_`` for spaces; they are restored
for models whose rt_info says ``model_type: YOLO`` (Ultralytics' marker).
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.image_info import ACCEPTED_INPUTS, image_input

__all__ = ["ModelInfo", "OutputInfo", "read_model_info", "ModelInfoError", "setting", "per_channel"]

#: rt_info/model_info keys read, and how their text is parsed
_RT_KEYS = ("model_type", "labels", "resize_type", "pad_value", "reverse_input_channels", "mean_values",
            "scale_values", "iou_threshold", "confidence_threshold")


class ModelInfoError(ValueError):
    """The model's metadata cannot be understood; the message names the file and key."""


@dataclass(frozen=True)
class OutputInfo:
    """One model output: name, shape (-1 for a dynamic dimension), the type of the
    operation producing it and that operation's attributes (for ``DetectionOutput``:
    ``num_classes``, ``background_label_id``, ...)."""

    index: int
    name: str
    shape: tuple[int, ...]
    op: str = ""
    op_attrs: dict[str, Any] = field(default_factory=dict)

    def shape_text(self) -> str:
        return "[" + ",".join("?" if d < 0 else str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class ModelInfo:
    """A model's interface and metadata (see the module docstring for the keys of ``meta``).

    ``input_hw``: (height, width) of the image input, -1 where dynamic.
    ``meta`` keys (all optional): ``model_type`` str, ``labels`` list[str],
    ``resize_type`` str, ``pad_value`` float, ``reverse_input_channels`` bool,
    ``mean_values``/``scale_values`` list[float], ``iou_threshold``/``confidence_threshold``
    float, ``imgsz`` (height, width), ``stride`` int, ``task`` str, ``end2end`` bool.
    ``origin``: which file or section each ``meta`` key came from (for messages).
    """

    path: Path
    input_name: str
    input_hw: tuple[int, int]
    layout: str
    outputs: tuple[OutputInfo, ...]
    meta: dict[str, Any]
    origin: dict[str, str]

    @property
    def dynamic(self) -> bool:
        return self.input_hw[0] < 0 or self.input_hw[1] < 0

    def shapes_text(self) -> str:
        """Output shapes for messages, e.g. ``[1,84,8400]`` or ``boxes [100,5], labels [100]``."""
        if len(self.outputs) == 1:
            return self.outputs[0].shape_text()
        return ", ".join(f"{o.name} {o.shape_text()}" for o in self.outputs)


_CACHE: dict[tuple[str, int, int], ModelInfo] = {}
_LOCK = threading.Lock()


def read_model_info(path: str | Path) -> ModelInfo:
    """Read ``path`` (an .xml, .onnx, .tflite, ...) without compiling it; cached per file
    version.  A missing, corrupt or unknown file raises the engine's one-line error."""
    from pipeline.engine import get_engine

    path = Path(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None:
        with _LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
    model = get_engine().read_model(path)
    info = _describe(path, model)
    if key is not None:
        with _LOCK:
            _CACHE[key] = info
    return info


def _describe(path: Path, model: Any) -> ModelInfo:
    inp = image_input(model)
    rank = None if inp is None else inp.get_partial_shape().rank
    if rank is None or not rank.is_static or rank.get_length() != 4:
        shapes = ", ".join(str(i.get_partial_shape()) for i in model.inputs)
        raise ModelInfoError(f"model {path} has inputs {shapes}; vapipe image stages need {ACCEPTED_INPUTS}")
    dims = [d.get_length() if d.is_static else -1 for d in inp.get_partial_shape()]
    if dims[3] == 3:
        layout, hw = "NHWC", (dims[1], dims[2])
    elif dims[1] == 3:
        layout, hw = "NCHW", (dims[2], dims[3])
    else:
        raise ModelInfoError(f"model {path} input shape {inp.get_partial_shape()} has no 3-channel axis; "
                             "expected NHWC or NCHW")
    outputs = []
    for i, out in enumerate(model.outputs):
        pshape = out.get_partial_shape()
        shape = tuple(d.get_length() if d.is_static else -1 for d in pshape) if pshape.rank.is_static else ()
        producer = out.get_node().input_value(0).get_node() if out.get_node().get_input_size() else out.get_node()
        op = producer.get_type_name()
        attrs: dict[str, Any] = {}
        if op.startswith("DetectionOutput"):
            attrs = _detection_output_attrs(producer)
        name = out.get_any_name() if out.get_names() else f"output{i}"
        outputs.append(OutputInfo(i, name, shape, op, attrs))
    meta: dict[str, Any] = {}
    origin: dict[str, str] = {}
    _read_rt_info(path, model, meta, origin)
    _read_onnx_props(path, model, meta, origin)
    _read_ultralytics_yaml(path, meta, origin)
    name = inp.get_any_name() if inp.get_names() else "input0"
    return ModelInfo(path, name, hw, layout, tuple(outputs), meta, origin)


def _detection_output_attrs(node: Any) -> dict[str, Any]:
    """A DetectionOutput op's attributes, with ``num_classes`` (opset 8 no longer stores it:
    it is the class scores per prior box, from the last dimension of its scores and priors
    inputs, whatever the batch)."""
    try:
        attrs = dict(node.get_attributes())
        if "num_classes" not in attrs:
            scores, priors = node.input_value(1).get_partial_shape(), node.input_value(2).get_partial_shape()
            if scores.rank.is_static and priors.rank.is_static and scores[-1].is_static and priors[-1].is_static:
                boxes = priors[-1].get_length() // 4
                per_batch = scores[-1].get_length()
                if boxes > 0 and per_batch % boxes == 0:
                    attrs["num_classes"] = per_batch // boxes
        return attrs
    except Exception:  # noqa: BLE001 - attributes are a hint only
        return {}


def _rt_text(model: Any, key: str) -> str | None:
    try:
        if not model.has_rt_info(["model_info", key]):
            return None
        return str(model.get_rt_info(["model_info", key]).astype(str))
    except Exception:  # noqa: BLE001 - an unreadable entry is treated as absent
        return None


def _numbers(text: str, where: str) -> list[float]:
    parts = [p for p in re.split(r"[\s,\[\]()]+", text.strip()) if p]
    try:
        return [float(p) for p in parts]
    except ValueError:
        raise ModelInfoError(f"{where}: expected numbers, got {text!r}") from None


def _boolean(text: str, where: str) -> bool:
    low = text.strip().lower()
    if low in ("yes", "true", "1", "on"):
        return True
    if low in ("no", "false", "0", "off", ""):
        return False
    raise ModelInfoError(f"{where}: expected YES/NO or true/false, got {text!r}")


def _read_rt_info(path: Path, model: Any, meta: dict[str, Any], origin: dict[str, str]) -> None:
    raw = {k: v for k in _RT_KEYS if (v := _rt_text(model, k)) is not None}
    where = f"{path} rt_info model_info"
    for key, text in raw.items():
        at = f"{where}/{key}"
        if key in ("model_type", "resize_type"):
            meta[key] = text.strip()
        elif key == "labels":
            names = text.split()
            if raw.get("model_type", "").strip() == "YOLO":  # Ultralytics writes spaces as "_"
                names = [n.replace("_", " ") for n in names]
            meta[key] = names
        elif key in ("pad_value", "iou_threshold", "confidence_threshold"):
            values = _numbers(text, at)
            if len(values) != 1:
                raise ModelInfoError(f"{at}: expected one number, got {text!r}")
            meta[key] = values[0]
        elif key == "reverse_input_channels":
            meta[key] = _boolean(text, at)
        else:
            meta[key] = _numbers(text, at)
        origin[key] = where


def _read_onnx_props(path: Path, model: Any, meta: dict[str, Any], origin: dict[str, str]) -> None:
    from pipeline.model_prep import onnx_metadata

    props = onnx_metadata(model)
    where = f"{path} metadata_props"
    _apply_ultralytics(props, meta, origin, where, literal=True)


def _read_ultralytics_yaml(path: Path, meta: dict[str, Any], origin: dict[str, str]) -> None:
    side = path.parent / "metadata.yaml"
    if path.suffix.lower() != ".xml" or not side.is_file():
        return
    try:
        data = yaml.safe_load(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ModelInfoError(f"{side}: cannot read: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    if data is None:
        return
    if not isinstance(data, dict):
        raise ModelInfoError(f"{side}: expected a mapping (names, imgsz, stride, task, ...)")
    _apply_ultralytics(data, meta, origin, str(side), literal=False)


def _apply_ultralytics(data: dict[str, Any], meta: dict[str, Any], origin: dict[str, str], where: str,
                       literal: bool) -> None:
    """Ultralytics' keys (as the YAML values, or as the text of ONNX metadata_props)."""

    def value(key: str) -> Any:
        v = data[key]
        if literal and isinstance(v, str):
            try:
                return ast.literal_eval(v)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return v  # plain text (e.g. task: detect)
        return v

    if "names" in data:
        names = value("names")
        meta["labels"] = _names_list(names, f"{where}: names")
        origin["labels"] = where
    if "imgsz" in data:
        size = value("imgsz")
        if isinstance(size, int):
            size = [size, size]
        if (not isinstance(size, (list, tuple)) or len(size) != 2
                or not all(isinstance(v, int) and v > 0 for v in size)):
            raise ModelInfoError(f"{where}: imgsz must be [height, width] or one integer, got {data['imgsz']!r}")
        meta["imgsz"] = (int(size[0]), int(size[1]))
        origin["imgsz"] = where
    if "stride" in data:
        stride = value("stride")
        if isinstance(stride, int) and stride > 0:
            meta["stride"] = stride
            origin["stride"] = where
    if "task" in data:
        meta["task"] = str(value("task"))
        origin["task"] = where
    end2end = value("end2end") if "end2end" in data else None
    args = value("args") if "args" in data else None
    if end2end is None and isinstance(args, dict) and "nms" in args:
        end2end = args["nms"]
    if isinstance(end2end, (bool, str)):
        meta["end2end"] = end2end if isinstance(end2end, bool) else _boolean(end2end, f"{where}: end2end")
        origin["end2end"] = where


def _names_list(names: Any, where: str) -> list[str]:
    """Ultralytics ``names`` ({0: 'person', ...} or a list) as a list indexed by class id."""
    if isinstance(names, (list, tuple)):
        return [str(n) for n in names]
    if isinstance(names, dict):
        try:
            ids = sorted(int(k) for k in names)
        except (TypeError, ValueError):
            raise ModelInfoError(f"{where}: class ids must be integers, got {list(names)[:5]!r}") from None
        if ids != list(range(len(ids))):
            raise ModelInfoError(f"{where}: class ids must be 0..{len(ids) - 1}, got {ids[:10]!r}")
        by_id = {int(k): str(v) for k, v in names.items()}
        return [by_id[i] for i in range(len(ids))]
    raise ModelInfoError(f"{where}: expected a dict {{0: name, ...}} or a list, got {type(names).__name__}")


def setting(key: str, settings: dict[str, Any], info: ModelInfo, default: Any) -> Any:
    """A preprocessing or post-processing value: the stage parameter if set, else the
    model's metadata, else ``default``."""
    value = settings.get(key)
    if value is None:
        value = info.meta.get(key)
    return default if value is None else value


def per_channel(values: Any, key: str, info: ModelInfo) -> tuple[float, float, float] | None:
    """1 or 3 numbers (``mean_values``, ``scale_values``) as one per channel; None stays None."""
    if values is None:
        return None
    vals = [float(v) for v in values]
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise ModelInfoError(f"model {info.path}: {key} needs 1 or 3 values, got {len(vals)}")
    if key == "scale_values" and any(v == 0 for v in vals):
        raise ModelInfoError(f"model {info.path}: scale_values must not be 0")
    return (vals[0], vals[1], vals[2])
