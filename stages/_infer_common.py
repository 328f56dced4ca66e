"""Parameters shared by every stage that runs an OpenVINO model."""

from __future__ import annotations

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
    """Instantiate the registered adapter ``decoder``; errors name the valid choices."""
    cls = adapter_class(kind, decoder, base)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ValueError(f"bad options for decoder {decoder!r}: {exc}") from None
