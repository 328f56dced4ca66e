"""vapipe on another inference engine (``vapipe bench --engine onnxruntime``): the mode
``vapipe-ort`` is the same pipeline, thread plan and in-memory sink as ``vapipe``, with
``engine: onnxruntime`` on every inference stage.  Its ratio is ``vapipe-ort/vapipe`` and
its objects are compared with vapipe's like every other mode's.

Only the vapipe modes change engine: the baselines reproduce the pipeline on OpenVINO
(:mod:`bench.chain`), so the engine is applied per mode, never through ``--set``.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Sequence

from .plan import ENGINE_MODES, BenchError

__all__ = ["ENGINES", "engine_mode", "mode_engine", "check_models", "engine_overrides"]

#: values of ``--engine``: openvino (vapipe's default: no extra mode) and the other engines
ENGINES = ("openvino", *ENGINE_MODES.values())


def engine_mode(engine: str) -> str | None:
    """The mode that runs vapipe on ``engine`` (None for openvino, vapipe's own mode);
    a one-line ValueError naming the valid engines otherwise."""
    if engine == "openvino":
        return None
    for mode, name in ENGINE_MODES.items():
        if name == engine:
            return mode
    raise ValueError(f"unknown --engine {engine!r}; valid: {', '.join(ENGINES)}")


def mode_engine(mode: str) -> str | None:
    """The engine a mode runs every inference stage on (None: the stages' own)."""
    return ENGINE_MODES.get(mode)


def check_models(mode: str, parts: Sequence[Any]) -> None:
    """Refuse ``mode`` in one line when a model of ``parts`` (:class:`bench.chain.ModelPart`,
    the pipeline's inference stages) is not a file its engine reads."""
    if mode_engine(mode) != "onnxruntime":
        return
    if importlib.util.find_spec("onnxruntime") is None:
        raise BenchError(f"bench mode {mode!r} cannot run: it needs the onnxruntime package "
                         "(pip install 'vapipe[onnxruntime]')")
    for part in parts:
        if part.path.suffix.lower() != ".onnx":
            raise BenchError(f"bench mode {mode!r} cannot run: stage {part.stage!r} has model {part.path} and "
                             f"ONNX Runtime reads .onnx files only (give one with --set {part.stage}.model=FILE.onnx)")


def engine_overrides(spec: Any, engine: str) -> dict[str, dict[str, Any]]:
    """``{stage: {"engine": engine}}`` for every stage of ``spec`` that runs a model (its
    parameters have an ``engine`` field)."""
    from pipeline.registry import resolve_stage_type

    return {st.name: {"engine": engine} for st in spec.stages
            if "engine" in getattr(resolve_stage_type(st.type), "Params").model_fields}
