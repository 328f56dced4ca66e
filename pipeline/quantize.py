"""``vapipe quantize``: an INT8 copy of a pipeline's detector, calibrated on the user's video.

NNCF post-training quantisation (optional dependency ``nncf``: ``pip install 'vapipe[quantize]'``)
of the detect stage's model.  Calibration inputs are real frames of ``--source``,
spread over the whole video, prepared exactly as the detect stage prepares them
(the adapter's letterbox or warp from the decoder's planes), then normalised as the
engine's preprocessing does (colour order, mean, scale), so NNCF sees the float
tensors the model sees at run time.

Accuracy control (:mod:`pipeline.quantize_control`): the INT8 model must keep, on the
calibration frames, the share of the f32 model's boxes (IoU >= ``min_iou``) that the
original model keeps at the precision the pipeline runs it at, less ``max_drop``: the
device's default, or f32 where the thread plan measured f32 to be no slower
(:mod:`pipeline.precision`).  Where NNCF's
fully quantised model misses that, the layers that harm the boxes most per multiply-add
go back to f32 until it holds; the summary names them.  On an AVX2 CPU without bf16
(default precision f32) the fully quantised pose detector keeps 88 % of the f32 boxes, so
about 30 % of its multiply-adds stay INT8; on a CPU where the pipeline runs the original in
bf16, which itself drops about as many boxes, the fully quantised model is expected to pass
as it is.

The result is an OpenVINO IR (``.xml`` + ``.bin``) of the *raw* model: the engine
adds its u8 preprocessing when it loads it, as for the original file.  Next to it
goes an override file ``{stage: {model: PATH}}`` for ``vapipe run --overrides`` (with the stage's
config and the precision the INT8 model was checked at, where the plan chose one).
Afterwards the INT8 model's boxes are compared with the original model's at f32
on held-out frames of the same video (every other frame is kept out of calibration).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .quantize_control import Boxes, ControlResult, Runner

__all__ = ["QuantizeError", "QuantizeResult", "quantize_detector", "float_input"]


class QuantizeError(RuntimeError):
    """Quantisation cannot run; the message is one line naming what is missing or wrong."""


@dataclass
class QuantizeResult:
    model: Path                      # the INT8 IR (.xml)
    overrides: Path                  # {stage: {model: ...}} for --overrides
    stage: str
    source_model: Path
    calibration_frames: int
    check_frames: int
    boxes_ref: int                   # boxes of the original model on the check frames
    boxes_kept: int                  # ... matched by an INT8 box at IoU >= min_iou
    boxes_int8: int
    mean_iou: float | None
    min_iou: float
    seconds: float
    default_precision: str           # what the pipeline runs the original model at on this device
    default_kept: float              # ... and the share of the f32 boxes it keeps (the bar for INT8)
    control: ControlResult | None = None   # which layers stayed f32, and why
    notes: list[str] = field(default_factory=list)

    @property
    def kept(self) -> float:
        return self.boxes_kept / self.boxes_ref if self.boxes_ref else 1.0

    def summary(self) -> str:
        iou = "-" if self.mean_iou is None else f"{self.mean_iou:.3f}"
        c = self.control
        layers = ""
        if c is not None and not c.f32:
            layers = (f"all {len(c.int8)} convolution/matrix layers INT8 (they keep {c.kept:.1%} of the f32 boxes on "
                      f"the calibration frames, target {c.target:.1%})\n")
        elif c is not None:
            named = (f"f32: {', '.join(c.f32)}" if len(c.f32) <= len(c.int8)
                     else f"INT8: {', '.join(c.int8)}; the others f32")
            layers = (f"{len(c.int8)} of {len(c.int8) + len(c.f32)} convolution/matrix layers INT8 ({c.int8_macs:.0%} "
                      f"of their multiply-adds; {c.kept:.1%} of the f32 boxes kept on the calibration frames, target "
                      f"{c.target:.1%}); {named}\n")
        return (f"quantized {self.stage} ({self.source_model.name}) on {self.calibration_frames} frames in "
                f"{self.seconds:.0f} s -> {self.model}\n{layers}"
                f"check on {self.check_frames} other frames: {self.boxes_kept}/{self.boxes_ref} boxes of the f32 "
                f"model kept at IoU >= {self.min_iou} ({self.kept:.1%}); the INT8 model finds {self.boxes_int8}, "
                f"mean IoU {iou} (the original at the pipeline's precision, {self.default_precision}, keeps "
                f"{self.default_kept:.1%})\n"
                f"use it: vapipe run ... --overrides {self.overrides}")


def float_input(image: np.ndarray, spec: Any, layout: str) -> np.ndarray:
    """The float tensor (1, ...) the engine's preprocessing makes of a u8 host image
    (H, W, 3) in ``spec.host_color``: colour order, ``(x - mean) / scale``, layout."""
    x = image.astype(np.float32)
    if spec.host_color != spec.model_color:
        x = x[..., ::-1]
    if spec.mean is not None:
        x = x - np.asarray(spec.mean, np.float32)
    if spec.scale is not None:
        x = x / np.asarray(spec.scale, np.float32)
    if layout == "NCHW":
        x = x.transpose(2, 0, 1)
    return np.ascontiguousarray(x[None])


def _sample_frames(uri: str, count: int) -> list[Any]:
    """``count`` decoded frames spread evenly over the video (PyAV frames, decoder format)."""
    import av

    from .videofile import count_frames

    total, _, _ = count_frames(uri)
    if total == 0:
        raise QuantizeError(f"quantize: no frames in {uri}")
    step = max(1, total // count)
    out = []
    with av.open(uri) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if i % step == 0:
                out.append(frame)
            if len(out) >= count:
                break
    return out


def _precision(compiled: Any) -> str:
    """The inference precision a compiled model runs at ("f32", "bf16", ...)."""
    try:
        hint = compiled.get_property("INFERENCE_PRECISION_HINT")
        return hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    except Exception:  # noqa: BLE001 - virtual devices may not report it
        return "device default"


class _CalibrationRun:
    """Runs models on the calibration frames as the pipeline runs them: the engine's u8
    preprocessing added, the stage's device and configuration, one request."""

    def __init__(self, adapter: Any, layout: str, hw: tuple[int, int], device: str, config: dict[str, Any],
                 frames: list[tuple[np.ndarray, Any]], sizes: list[tuple[int, int]]) -> None:
        import openvino as ov

        self.core = ov.Core()  # no model cache: every variant tried is compiled once
        self.adapter, self.layout, self.hw, self.device = adapter, layout, hw, device
        # one frame at a time on one thread: the least CPU per frame (on the 2-core EPYC, 15 %
        # less than two threads, which gained no time on a loaded machine); same boxes
        self.config = {**config, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 1}
        self.frames, self.sizes = frames, sizes

    def compile(self, model: Any, extra: dict[str, Any] | None = None) -> Any:
        from .model_prep import with_preprocessing

        ready = with_preprocessing(model.clone(), self.adapter.input_spec, self.layout, self.hw)
        return self.core.compile_model(ready, self.device, {**self.config, **(extra or {})})

    def boxes(self, compiled: Any, indices: Iterable[int]) -> list[Boxes]:
        request = compiled.create_infer_request()
        found = []
        for i in indices:
            image, box = self.frames[i]
            request.infer({0: image[None]})
            outs = [request.get_output_tensor(k).data for k in range(len(compiled.outputs))]
            dets = box.detections_to_source(self.adapter.decode(outs, self.hw), self.sizes[i])
            found.append((dets.xyxy, dets.score))
        return found

    def runner(self, extra: dict[str, Any]) -> Runner:
        def run_model(model: Any) -> Callable[[Iterable[int]], list[Boxes]]:
            compiled = self.compile(model, extra)
            return lambda indices: self.boxes(compiled, indices)
        return run_model


def quantize_detector(name: str, source: str, config: str | Path = "pipelines.yaml", stage: str | None = None,
                      frames: int = 300, out: str | Path | None = None, min_iou: float = 0.8,
                      max_drop: float = 0.025, log: Callable[[str], None] | None = None) -> QuantizeResult:
    """Quantise the detect stage ``stage`` (default: the first one) of pipeline ``name``.

    ``max_drop``: on the calibration frames the INT8 model may keep this share fewer of the
    f32 model's boxes than the default precision does (layers go back to f32 until it
    holds; 1 keeps NNCF's fully quantised model)."""
    try:
        import logging

        import nncf

        nncf.set_log_level(logging.WARNING)
    except ImportError:
        raise QuantizeError("vapipe quantize needs NNCF: pip install 'vapipe[quantize]' "
                            "(or pip install nncf)") from None
    import openvino as ov

    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters

    from stages.detect import Detect, detector_adapter

    from .config import load_pipeline
    from .engine import get_engine
    from .frame import Frame
    from .graph import build_graph
    from .models import resolve_model
    from .precision import with_hint
    from .records import compare_records
    from .registry import resolve_stage_type
    from .threads import plan_for_graph

    say = log or (lambda msg: None)
    if frames < 4:
        raise QuantizeError(f"--frames must be >= 4, got {frames}")
    if not 0.0 <= max_drop <= 1.0:
        raise QuantizeError(f"--max-drop must be between 0 and 100 (percentage points), got {max_drop * 100:g}")
    if "://" in source or not Path(source).is_file():
        raise QuantizeError(f"quantize needs a video file as --source (frames are sampled over all of it); "
                            f"not a file: {source}")
    spec = load_pipeline(config, name)
    detects = [st for st in spec.stages if issubclass(resolve_stage_type(st.type), Detect)]
    if not detects:
        raise QuantizeError(f"pipeline {name!r} has no detect stage to quantize")
    chosen = next((st for st in detects if st.name == stage), None) if stage else detects[0]
    if chosen is None:
        raise QuantizeError(f"pipeline {name!r} has no detect stage {stage!r}; detect stages: "
                            f"{', '.join(st.name for st in detects)}")
    params = Detect.Params(**chosen.params)
    model_path = resolve_model(params.model)
    adapter = detector_adapter(params, model_path)
    if hasattr(adapter, "input_size"):
        raise QuantizeError(f"stage {chosen.name!r}: models with an input size per source are not supported")
    # the reference for the check: the original model at full precision
    reference = get_engine().load(model_path, adapter.input_spec, params.device, params.hint,
                                  {**params.config, "INFERENCE_PRECISION_HINT": "f32"})
    hw = reference.input_hw

    t0 = time.monotonic()
    sampled = _sample_frames(source, frames * 2)
    prepared = []
    for i, av_frame in enumerate(sampled):
        fr = Frame(source_id="quantize", seq=i, width=av_frame.width, height=av_frame.height, av_frame=av_frame)
        image, box = adapter.host_input(fr, hw)
        prepared.append((image, box))
    calib, check = prepared[0::2], prepared[1::2]
    say(f"quantize {chosen.name}: {model_path.name}, {len(calib)} calibration frames from {Path(source).name}")

    raw = ov.Core().read_model(str(model_path))
    dims = [d.get_length() if d.is_static else -1 for d in raw.input(0).get_partial_shape()]
    layout = "NHWC" if dims[3] == 3 else "NCHW"
    shape = [1, hw[0], hw[1], 3] if layout == "NHWC" else [1, 3, hw[0], hw[1]]
    raw.reshape({raw.input(0).get_any_name(): shape})
    data = [float_input(image, adapter.input_spec, layout) for image, _ in calib]
    try:
        # The PERFORMANCE preset (symmetric activations): on the pose detector the MIXED one
        # kept 3 % more of the f32 boxes but added 26 % false boxes.
        # weights keep their FakeQuantize nodes, so that layers can go back to f32 exactly
        quantized = nncf.quantize(raw, nncf.Dataset(data), subset_size=len(data),
                                  preset=nncf.QuantizationPreset.PERFORMANCE,
                                  advanced_parameters=AdvancedQuantizationParameters(
                                      backend_params={"compress_weights": False}))
    except Exception as exc:  # noqa: BLE001 - NNCF raises many types; one line for the user
        raise QuantizeError(f"NNCF could not quantize {model_path.name}: {type(exc).__name__}: {exc}") from None

    # accuracy control on the calibration frames, run as the pipeline runs the model (u8 input)
    from .quantize_control import QuantizedLayers, compress_weights, control, matched

    # the original and the INT8 model run at the precision the pipeline's thread plan gives the original
    planned = plan_for_graph(build_graph(spec, str(config)), [source]).precision.get(chosen.name)
    pipeline_config = with_hint(dict(params.config), planned)
    frames_run = _CalibrationRun(adapter, layout, hw, params.device,
                                 {**get_engine().default_config, **pipeline_config}, calib,
                                 [(f.width, f.height) for f in sampled[0::2]])
    everything = range(len(calib))
    reference_boxes = frames_run.runner({"INFERENCE_PRECISION_HINT": "f32"})(raw)(everything)
    default = get_engine().load(model_path, adapter.input_spec, params.device, params.hint, pipeline_config)
    if _precision(default.compiled) == "f32":
        target = 1.0 - max_drop          # the default precision is the reference's
    else:
        hit, total = matched(reference_boxes, frames_run.runner({})(raw)(everything), min_iou)
        target = (hit / total if total else 1.0) - max_drop
    try:
        quantized, decided = control(QuantizedLayers(raw, quantized), frames_run.runner({}), reference_boxes, target,
                                     min_iou, say)
    except ValueError as exc:
        raise QuantizeError(f"quantize {chosen.name}: {exc}; allow a larger drop with --max-drop") from None
    if decided.f32:
        say(f"quantize {chosen.name}: {len(decided.f32)} layers back to f32, {len(decided.int8)} INT8")

    out = Path(out) if out else Path.home() / ".cache" / "vapipe" / "int8" / f"{model_path.stem}-int8.xml"
    out.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(compress_weights(quantized), str(out), compress_to_fp16=False)
    seconds = time.monotonic() - t0

    # The INT8 model's boxes (run as the pipeline will) against the original's at f32, on the
    # held-out frames, through the engine.
    int8 = get_engine().load(out, adapter.input_spec, params.device, params.hint, pipeline_config)
    records: dict[str, dict[str, Any]] = {"ref": {}, "int8": {}, "default": {}}
    precision = _precision(default.compiled)
    # at f32 the default model is the reference model compiled with the same settings: same boxes
    runs = [("ref", reference), ("int8", int8)] + ([] if precision == "f32" else [("default", default)])
    for key, model in runs:
        pool = model.create_pool(1)
        for i, ((image, box), av_frame) in enumerate(zip(check, sampled[1::2])):
            dets = box.detections_to_source(pool.run(image, lambda outs: adapter.decode(outs, hw)),
                                            (av_frame.width, av_frame.height))
            records[key][str(i)] = {"objects": [{"box": [float(v) for v in b]} for b in dets.xyxy]}
    agreement = compare_records(records["ref"], records["int8"], min_iou=min_iou)
    baseline = compare_records(records["ref"], records["default" if precision != "f32" else "ref"], min_iou=min_iou)
    overrides = out.with_suffix(".yaml")
    import yaml

    # the INT8 model runs at the precision it was checked at (not measured again)
    pinned = {"config": pipeline_config} if pipeline_config != dict(params.config) else {}

    overrides.write_text(f"# INT8 {model_path.name} for pipeline {name}, calibrated on {Path(source).name}\n"
                         + yaml.safe_dump({chosen.name: {"model": str(out.resolve()), **pinned}}, sort_keys=False))
    return QuantizeResult(model=out, overrides=overrides, stage=chosen.name, source_model=model_path,
                          calibration_frames=len(calib), check_frames=len(check),
                          boxes_ref=agreement["objects_ref"], boxes_kept=agreement["matched"],
                          boxes_int8=agreement["objects"], mean_iou=agreement["mean_iou"], min_iou=min_iou,
                          seconds=seconds, default_precision=precision, control=decided,
                          default_kept=(baseline["matched"] / baseline["objects_ref"]
                                        if baseline["objects_ref"] else 1.0))
