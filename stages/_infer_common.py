"""Parameters shared by every stage that runs an OpenVINO model."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.engine import DEVICE_PREFIXES, validate_device
from pipeline.stage import Params

Hint = Literal["LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"]


class InferParams(Params):
    model: str = Field(description="model name (e.g. mediapipe/face_detection_short_range) or file path")
    engine: Literal["openvino", "onnxruntime"] = Field(
        "openvino", description="inference engine: openvino (any device, every model format) or onnxruntime "
        "(CPU, .onnx models)")
    decoder: str = Field(description="output decoder for this model family")
    device: str = Field("CPU", description=f"OpenVINO device: {', '.join(DEVICE_PREFIXES)}, e.g. AUTO:CPU")
    hint: Hint = "THROUGHPUT"
    requests: int = Field(0, ge=0, description="infer requests per camera; 0 = device's optimal number (at least 2)")
    config: dict[str, Any] = Field(default_factory=dict, description="extra OpenVINO compile properties")
    options: dict[str, Any] = Field(default_factory=dict, description="decoder options (thresholds, ...)")

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        return validate_device(value)


def adapter_class(kind: str, decoder: str, base: type) -> type:
    """The registered adapter class ``decoder`` of family ``base``; errors name the valid choices."""
    from stages.models import DECODERS, load_adapters

    load_adapters()
    cls = DECODERS.get(decoder)
    if cls is None or not issubclass(cls, base):
        valid = sorted(n for n, c in DECODERS.items() if issubclass(c, base))
        raise ValueError(f"unknown {kind} decoder {decoder!r}; valid: {', '.join(valid)}")
    return cls


def make_adapter(kind: str, decoder: str, options: dict[str, Any], base: type) -> Any:
    """Instantiate the registered adapter ``decoder``; errors name the option and what is valid."""
    cls = adapter_class(kind, decoder, base)
    _check_option_names(cls, decoder, options)
    _check_option_types(cls, decoder, options)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for decoder {decoder!r}: {exc}") from None


def _check_option_names(cls: type, decoder: str, options: dict[str, Any]) -> None:
    """Options ``cls.__init__`` does not take are one line naming the ones it does."""
    params = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    valid = [p.name for p in params if p.name != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    unknown = [name for name in options if name not in valid]
    if unknown:
        raise ValueError(f"decoder {decoder!r}: unknown option {unknown[0]!r}; valid: {', '.join(valid) or 'none'}")


def _check_option_types(cls: type, decoder: str, options: dict[str, Any]) -> None:
    """Options whose annotation in ``cls.__init__`` is a number or a bool must be one (a YAML or JSON
    string such as ``"abc"`` would otherwise fail deep inside the decoder, naming no option)."""
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - annotations that cannot be resolved: nothing to check
        return
    numbers = {int: "an integer", float: "a number", bool: "true or false"}
    for name, value in options.items():
        kinds = [k for k in (typing.get_args(hints.get(name)) or (hints.get(name),)) if k in numbers]
        if not kinds or value is None:
            continue
        ok = any(isinstance(value, k) and (k is bool or not isinstance(value, bool)) or
                 (k is float and isinstance(value, int) and not isinstance(value, bool)) for k in kinds)
        if not ok:
            raise ValueError(f"decoder {decoder!r} option {name!r}: expected {numbers[kinds[0]]}, got {value!r}")
