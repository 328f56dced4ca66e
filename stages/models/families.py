"""Choosing a detector family for a model: the one named by ``decoder:``, else the one
its outputs and metadata fit.

Recognition looks at the output shapes (e.g. [1, 84, 8400] for a 640x640 input is
[1, 4+nc, cells] of ``yolo``; [1, 25200, 85] is 3 anchors per cell of ``yolov5``;
[1, 1, 200, 7] or a ``DetectionOutput`` op is ``ssd``), then narrows several fits
with the metadata (rt_info ``model_type``; Ultralytics' metadata means ``yolo`` or,
with ``end2end``/``nms``, ``yolo_end2end``) and with the number of label names.
Several fits left is an error naming the shapes and the fitting ``decoder:`` values;
so is none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import DECODERS, DetectorAdapter
from .detector_base import GENERIC_FAMILIES, Layout, ModelDetector
from .labels import load_labels
from .model_info import ModelInfo, read_model_info

__all__ = ["build_detector", "choose_family", "FamilyError"]

#: rt_info ``model_type`` values (model_api's wrapper names, Ultralytics' "YOLO") -> families
_MODEL_TYPES = {
    "yolox": {"yolox"}, "ssd": {"ssd"}, "yolov8": {"yolo"}, "yolo11": {"yolo"}, "yolov5": {"yolo"},
    "yolov10": {"yolo_end2end"}, "yolo": {"yolo", "yolo_end2end"},
}


class FamilyError(ValueError):
    """The model fits no family, several, or not the one named; one line."""


def _describe_fit(name: str, layout: Layout) -> str:
    cls = GENERIC_FAMILIES[name]
    classes = "" if layout.num_classes is None else f", {layout.num_classes} classes"
    orient = ""
    if name == "yolo":
        orient = " channels first" if layout.channels_first else " transposed"
    return f"{name} ({cls.layout_text}{orient}{classes})"


def _other_decoders() -> str:
    return ", ".join(sorted(n for n, c in DECODERS.items()
                            if issubclass(c, DetectorAdapter) and n not in GENERIC_FAMILIES))


def choose_family(info: ModelInfo, decoder: str | None, settings: dict[str, Any],
                  options: dict[str, Any] | None = None) -> tuple[type[ModelDetector], Layout]:
    """The family class and layout for ``info`` (see the module docstring)."""
    from . import load_adapters

    load_adapters()
    task = info.meta.get("task")
    if task is not None and task != "detect":
        raise FamilyError(f"model {info.path} is a {task!r} model ({info.origin.get('task')}); the detect stage "
                          "decodes detection models (task: detect)")
    hw = info.input_hw  # a dynamic input runs at sizes chosen per source: no row count to expect
    fits = {name: lay for name, cls in GENERIC_FAMILIES.items() if (lay := cls.layout(info, hw, options)) is not None}
    if decoder is not None:
        if decoder not in fits:
            cls = GENERIC_FAMILIES[decoder]
            fitting = ", ".join(fits) or "none of " + ", ".join(GENERIC_FAMILIES)
            raise FamilyError(f"model {info.path}: outputs {info.shapes_text()} do not fit decoder {decoder!r} "
                              f"({cls.layout_text}); decoders that fit: {fitting}")
        return GENERIC_FAMILIES[decoder], fits[decoder]
    if not fits:
        layouts = "; ".join(f"{n} {c.layout_text}" for n, c in GENERIC_FAMILIES.items())
        raise FamilyError(f"model {info.path}: outputs {info.shapes_text()} fit no detector family ({layouts}); "
                          f"for other models set decoder: ({_other_decoders()})")
    fits = _narrow_by_metadata(info, fits)
    fits = _narrow_by_labels(info, fits, settings)
    if len(fits) > 1:
        raise FamilyError(f"model {info.path}: outputs {info.shapes_text()} fit several detector families: "
                          f"{'; '.join(_describe_fit(n, lay) for n, lay in fits.items())}; set decoder: to one of "
                          f"{', '.join(fits)}")
    name, layout = next(iter(fits.items()))
    return GENERIC_FAMILIES[name], layout


def _keep_if_any(fits: dict[str, Layout], allowed: set[str]) -> dict[str, Layout]:
    narrowed = {k: v for k, v in fits.items() if k in allowed}
    return narrowed or fits


def _narrow_by_metadata(info: ModelInfo, fits: dict[str, Layout]) -> dict[str, Layout]:
    meta = info.meta
    model_type = str(meta.get("model_type", "")).lower()
    if model_type in _MODEL_TYPES:
        fits = _keep_if_any(fits, _MODEL_TYPES[model_type])
    if "end2end" in meta:
        fits = _keep_if_any(fits, {"yolo_end2end"} if meta["end2end"] else {"yolo"})
    if "task" in meta or "imgsz" in meta:  # Ultralytics' own metadata
        fits = _keep_if_any(fits, {"yolo", "yolo_end2end"})
    return fits


def _narrow_by_labels(info: ModelInfo, fits: dict[str, Layout], settings: dict[str, Any]) -> dict[str, Layout]:
    given = settings.get("labels")
    try:
        labels = load_labels(given) if given is not None else info.meta.get("labels")
    except ValueError:
        return fits  # the family reports the bad file when it loads it
    if labels is None or len(fits) < 2:
        return fits
    exact = {k: v for k, v in fits.items() if v.num_classes == len(labels)}
    return exact or fits


def _check_fixed_fit(model_path: str | Path, decoder: str, cls: type[DetectorAdapter],
                     options: dict[str, Any]) -> None:
    """FamilyError when the model's outputs cannot be what ``decoder`` reads, naming the
    decoders they do fit (found now, when the model loads, not at the first frame)."""
    from .model_info import ModelInfoError

    try:
        info = read_model_info(model_path)
    except ModelInfoError:
        return  # not an image model vapipe can describe: the engine says so when it loads it
    shapes = [o.shape for o in info.outputs]
    problem = cls.output_problem(shapes)
    if problem is None:
        return
    generic = {name: lay for name, c in GENERIC_FAMILIES.items()
               if (lay := c.layout(info, info.input_hw, options)) is not None}
    fitting = list(_narrow_by_metadata(info, generic))
    fitting += [name for name, c in sorted(DECODERS.items())
                if issubclass(c, DetectorAdapter) and name not in GENERIC_FAMILIES and name != decoder
                and _checks_outputs(c) and c.output_problem(shapes) is None]
    raise FamilyError(f"model {info.path}: outputs {info.shapes_text()} do not fit decoder {decoder!r} (it "
                      f"{problem}); decoders that fit: {', '.join(fitting) or 'none'}")


def _checks_outputs(cls: type[DetectorAdapter]) -> bool:
    return cls.output_problem.__func__ is not DetectorAdapter.output_problem.__func__  # type: ignore[attr-defined]


def build_detector(model_path: str | Path, decoder: str | None, options: dict[str, Any],
                   settings: dict[str, Any]) -> DetectorAdapter:
    """The adapter for ``model_path``: a model-driven family (``decoder`` None or one of
    :data:`GENERIC_FAMILIES`) configured from ``settings`` (stage parameters that are set)
    and the model's metadata, or one of the fixed families (``blazeface``, ...) built
    from ``options``."""
    from stages._infer_common import make_adapter

    if decoder is not None and decoder not in GENERIC_FAMILIES:
        if settings:
            raise ValueError(f"decoder {decoder!r} does not take {', '.join(settings)} (those are for "
                             f"{', '.join(GENERIC_FAMILIES)}); set its own options: instead")
        adapter = make_adapter("detector", decoder, options, DetectorAdapter)
        _check_fixed_fit(model_path, decoder, type(adapter), options)
        return adapter
    info = read_model_info(model_path)
    cls, layout = choose_family(info, decoder, settings, options)
    return cls(info, settings, layout, options)
