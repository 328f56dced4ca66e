"""Stage parameters for models users bring: labels, thresholds, NMS and the input
preprocessing, each optional.  Unset (None) means "from the model's own metadata,
else the family's default"; a value set here always wins."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.stage import Params

__all__ = ["PreprocessSettings", "DetectorSettings", "ClassifierSettings", "RESIZE_TYPES"]

#: model_api's names (also used in OpenVINO rt_info): stretch, keep aspect at the top-left,
#: keep aspect centred
RESIZE_TYPES = ("standard", "fit_to_window", "fit_to_window_letterbox")
ResizeType = Literal["standard", "fit_to_window", "fit_to_window_letterbox"]


class PreprocessSettings(Params):
    resize_type: ResizeType | None = Field(
        None, description="standard (stretch), fit_to_window (keep aspect, top-left) or fit_to_window_letterbox "
        "(keep aspect, centred); default: the model's rt_info, else the family's")
    reverse_input_channels: bool | None = Field(
        None, description="true: the model takes RGB, false: BGR; default: the model's rt_info, else the family's")
    mean_values: list[float] | None = Field(
        None, description="subtracted per channel (model's colour order, 0..255 units), 1 or 3 values")
    scale_values: list[float] | None = Field(
        None, description="divided per channel after the mean (e.g. [255]), 1 or 3 values")
    pad_value: int | None = Field(None, ge=0, le=255, description="letterbox padding value")

    @field_validator("mean_values", "scale_values")
    @classmethod
    def _one_or_three(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and len(value) not in (1, 3):
            raise ValueError(f"expected 1 or 3 values, got {len(value)}")
        return value

    @field_validator("scale_values")
    @classmethod
    def _nonzero(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and any(v == 0 for v in value):
            raise ValueError("scale values must not be 0")
        return value


class DetectorSettings(PreprocessSettings):
    labels: list[str] | dict[int, str] | str | None = Field(
        None, description="class names: a list, {id: name}, or a file (one per line, JSON or YAML); default: "
        "the model's metadata")
    threshold: float | None = Field(None, ge=0.0, le=1.0, description="keep objects scoring above this")
    iou: float | None = Field(None, ge=0.0, le=1.0, description="NMS: drop a box overlapping a better one by more")
    max_det: int | None = Field(None, ge=1, description="at most this many objects per frame")
    agnostic_nms: bool | None = Field(None, description="NMS across classes (true) or per class (false)")
    classes: list[str | int] | None = Field(None, description="keep only these labels (names or class ids)")
    input_size: tuple[int, int] | None = Field(
        None, description="[height, width] for models with a dynamic input; default: the model's imgsz")

    @field_validator("input_size")
    @classmethod
    def _positive(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and min(value) < 1:
            raise ValueError(f"expected [height, width] > 0, got {list(value)}")
        return value

    def generic_fields_set(self) -> dict[str, Any]:
        """The settings the user gave (not None)."""
        return {k: v for k in DetectorSettings.model_fields if (v := getattr(self, k)) is not None}


class ClassifierSettings(PreprocessSettings):
    heads: dict[str | int, dict[str, Any]] | None = Field(
        None, description="attributes decoder: output name or index -> {type: softmax|multilabel|regression|point, "
        "name, labels, threshold, scale, offset, activation, scores}; default: every output")

    def generic_fields_set(self) -> dict[str, Any]:
        return {k: v for k in ClassifierSettings.model_fields if (v := getattr(self, k)) is not None}
