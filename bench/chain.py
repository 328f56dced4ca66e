"""What the baselines reproduce: a pipeline's detector and the region models after it.

A pipeline the baselines can run is a source, one ``detect`` stage, then any number
of ``classify`` stages on its objects (each may read what the ones before it wrote:
the OCR recogniser turns a line upright by the angle the direction model found),
then output sinks.  Every mode uses the stages' own adapters (input geometry,
output decoding), models, devices and non-thread OpenVINO properties (e.g.
``INFERENCE_PRECISION_HINT``); the thread properties are vapipe's plan and stay
out of the baselines, which keep the runtimes' own defaults.  The precision vapipe's
plan measured best (:mod:`pipeline.precision`, ``BenchPlan.precision``) is given to the
baselines too, so that every mode computes the same thing; only ``vapipe-unplanned``
keeps the runtime's default precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from .plan import BenchError, BenchPlan

__all__ = ["ModelPart", "Chain", "CompiledPart", "load_spec", "load_chain", "plan_chain", "selected", "compile_plain",
           "compile_tuned", "compile_chain", "outputs", "THREAD_KEYS"]

#: OpenVINO properties about threads and streams: the baselines leave them to the runtime
THREAD_KEYS = frozenset({"NUM_STREAMS", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS",
                         "ENABLE_CPU_PINNING", "ENABLE_HYPER_THREADING", "SCHEDULING_CORE_TYPE", "AFFINITY",
                         "CPU_THREADS_NUM", "CPU_THROUGHPUT_STREAMS", "CPU_BIND_THREAD"})


@dataclass
class ModelPart:
    """One inference stage of the chain, with its adapter instantiated."""

    stage: str
    decoder: str                # the adapter's registered name (e.g. db_text)
    path: Path
    adapter: Any
    device: str
    hint: str
    config: dict[str, Any]
    requests: int
    on: list[str] = field(default_factory=list)   # region models: object labels they run on
    max_objects: int = 32

    @property
    def baseline_config(self) -> dict[str, Any]:
        """The stage's OpenVINO properties without the thread/stream ones."""
        return {k: v for k, v in self.config.items() if k.upper() not in THREAD_KEYS}


@dataclass
class Chain:
    detect: ModelPart
    regions: list[ModelPart]
    decode_threads: int   # the source stage's ``threads`` (0: FFmpeg's choice)


def load_spec(plan: BenchPlan) -> Any:
    """The pipeline spec of ``plan`` with its ``--set`` values applied."""
    from pipeline.config import load_config
    from pipeline.overrides import apply_overrides

    spec = load_config(plan.config, check_files=False).get(plan.pipeline)
    return apply_overrides(spec, list(plan.sets)) if plan.sets else spec


def plan_chain(plan: BenchPlan) -> Chain:
    """The chain of ``plan``'s pipeline, each model at the precision vapipe's plan chose for it
    (``plan.precision``) unless the stage's config sets one."""
    from pipeline.precision import with_hint

    chain = load_chain(load_spec(plan))
    for part in [chain.detect, *chain.regions]:
        part.config = with_hint(part.config, plan.precision.get(part.stage))
    return chain


def load_chain(spec: Any) -> Chain:
    """The detector and region models of ``spec``; a one-line BenchError if it has none or
    has a stage no baseline reproduces."""
    from pipeline.models import resolve_model
    from pipeline.registry import resolve_stage_type
    from stages.classify import Classify, region_adapter
    from stages.decode import Decode
    from stages.detect import Detect, detector_adapter

    det: ModelPart | None = None
    regions: list[ModelPart] = []
    threads = 0
    for st in spec.stages:
        cls = resolve_stage_type(st.type)
        if cls.kind == "sink":
            continue
        params = cls.Params(**st.params)
        if getattr(params, "engine", "openvino") != "openvino":
            raise BenchError(f"bench: stage {st.name!r} runs on engine {params.engine!r}; the baselines run "
                             f"OpenVINO (compare like with like: --set {st.name}.engine=openvino)")
        if issubclass(cls, Decode):
            threads = params.threads
        elif issubclass(cls, Detect) and det is None:
            path = resolve_model(params.model)
            det = ModelPart(st.name, params.decoder, path, detector_adapter(params, path),
                            params.device, params.hint, dict(params.config), params.requests)
        elif issubclass(cls, Classify) and det is not None:
            path = resolve_model(params.model)
            regions.append(ModelPart(st.name, params.decoder, path, region_adapter(params, path),
                                     params.device, params.hint, dict(params.config), params.requests,
                                     list(params.on), params.max_objects))
        else:
            raise BenchError(f"bench: pipeline {spec.name!r} stage {st.name!r} ({st.type}) has no baseline; the "
                             "baselines reproduce one detect stage followed by classify stages on its objects")
    if det is None:
        raise BenchError(f"bench: pipeline {spec.name!r} has no detect stage to compare against")
    return Chain(det, regions, threads)


def selected(dets: Any, part: ModelPart) -> list[int]:
    """Objects a region model runs on (labels in ``on``, highest scores first), as Classify chooses."""
    idx = dets.with_label(part.on)
    if len(idx) > part.max_objects:
        idx = idx[(-dets.score[idx]).argsort(kind="stable")[: part.max_objects]]
    return [int(i) for i in idx]


@dataclass
class CompiledPart:
    """A part's compiled model as a baseline loaded it."""

    part: ModelPart
    compiled: Any
    input_hw: tuple[int, int]   # (height, width) of the model input; width -1 if dynamic
    nchw: bool                  # the compiled model takes float NCHW (plain) rather than u8 NHWC
    n_outputs: int


def _sized_model(core: Any, part: ModelPart, src_wh: tuple[int, int]) -> tuple[Any, str, tuple[int, int]]:
    """The model read and reshaped to batch 1 and the input size its adapter gives
    (``input_size(src_wh)`` for detectors sized per source, ``input_spec.size`` else);
    a width of -1 stays dynamic.  Returns (model, layout, (h, w))."""
    model = core.read_model(str(part.path))
    pshape = model.input(0).get_partial_shape()
    dims = [d.get_length() if d.is_static else -1 for d in pshape]
    layout = "NHWC" if dims[3] == 3 else "NCHW"
    h, w = (dims[1], dims[2]) if layout == "NHWC" else (dims[2], dims[3])
    size = part.adapter.input_size(src_wh) if hasattr(part.adapter, "input_size") else part.adapter.input_spec.size
    if size is not None:
        h = size[0] if h < 0 else h
        w = size[1] if w < 0 else w
    model.reshape({model.input(0).get_any_name(): [1, h, w, 3] if layout == "NHWC" else [1, 3, h, w]})
    if hasattr(part.adapter, "bind_model"):  # e.g. the recogniser's dictionary, from the model's metadata
        from pipeline.model_prep import onnx_metadata

        part.adapter.bind_model(SimpleNamespace(path=part.path, metadata=onnx_metadata(model)))
    return model, layout, (h, w)


def compile_plain(core: Any, part: ModelPart, src_wh: tuple[int, int]) -> CompiledPart:
    """The model as the naive loop compiles it: float input, normalised on the host,
    the device's default settings plus the stage's non-thread properties."""
    model, layout, hw = _sized_model(core, part, src_wh)
    compiled = core.compile_model(model, part.device, part.baseline_config)
    return CompiledPart(part, compiled, hw, layout == "NCHW", len(compiled.outputs))


def compile_tuned(core: Any, part: ModelPart, src_wh: tuple[int, int]) -> CompiledPart:
    """The model as a user who read the OpenVINO docs compiles it: u8 NHWC input with
    conversion and normalisation inside (``PrePostProcessor``), THROUGHPUT hint, plus the
    stage's non-thread properties."""
    from pipeline.model_prep import with_preprocessing

    model, layout, hw = _sized_model(core, part, src_wh)
    model = with_preprocessing(model, part.adapter.input_spec, layout, hw)
    compiled = core.compile_model(model, part.device, {"PERFORMANCE_HINT": "THROUGHPUT", **part.baseline_config})
    return CompiledPart(part, compiled, hw, False, len(compiled.outputs))


def compile_chain(plan: BenchPlan, compile_part: Callable[[Any, ModelPart, tuple[int, int]], CompiledPart]
                  ) -> tuple[Chain, CompiledPart, list[CompiledPart]]:
    """The plan's chain and its models compiled with ``compile_part`` (:func:`compile_plain`
    or :func:`compile_tuned`) on one OpenVINO Core: (chain, detector, region models)."""
    import openvino as ov

    from pipeline.engine import numpy_bridge_ready

    chain = plan_chain(plan)
    core = ov.Core()
    numpy_bridge_ready()  # before the cameras' threads make their first conversions together
    src_wh = (plan.width, plan.height)
    return chain, compile_part(core, chain.detect, src_wh), [compile_part(core, p, src_wh) for p in chain.regions]


def outputs(request: Any, n: int) -> list[np.ndarray]:
    """Output arrays of a finished request (views, valid until it runs again)."""
    return [request.get_output_tensor(i).data for i in range(n)]
