"""The inference engines a stage can run on, by name: ``openvino`` (default) and
``onnxruntime``.  Both give a model with ``input_hw``, ``metadata``, ``path`` and
``create_pool`` (a camera's requests in flight, results in submission order)."""

from __future__ import annotations

import os
from typing import Any

from .engine import InputSpec, get_engine

__all__ = ["ENGINES", "load_model"]

ENGINES = ("openvino", "onnxruntime")


def load_model(engine: str, path: str | os.PathLike[str], spec: InputSpec, device: str = "CPU",
               hint: str = "THROUGHPUT", config: dict[str, Any] | None = None, keep: bool = True) -> Any:
    """The model at ``path`` loaded by ``engine`` (shared by every camera; cached)."""
    if engine == "openvino":
        return get_engine().load(path, spec, device, hint, config, keep=keep)
    if engine == "onnxruntime":
        from .ort_engine import get_ort_engine

        return get_ort_engine().load(path, spec, device, hint, config, keep=keep)
    raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
