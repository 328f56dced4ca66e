"""Object detection on whole frames with an OpenVINO model.

The frame is scaled to the model's input size as uint8 (letterboxed or
stretched, as the model family needs) on the path ``resize`` chooses: straight
from the decoder's planes on the host, or by the engine from the whole frame;
colour order, float conversion and normalisation run inside the compiled
OpenVINO model (on the host for ONNX Runtime).  Detections are added to
``frame.detections`` in source pixels.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from pipeline.costs import ModelProbe
from pipeline.engine import InputSpec, LoadedModel, RequestPool
from pipeline.engines import load_model
from pipeline.frame import DETECTION_RAN, GATE, Detections, Frame, attr_values
from pipeline.resize_match import opencv_matches_engine
from pipeline.stage import InferStage

from ._infer_common import InferParams, adapter_class, make_adapter
from .model_settings import DetectorSettings
from .models.base import DetectorAdapter, Letterbox
from .models.families import FamilyError

log = logging.getLogger("vapipe.detect")


class Detect(InferStage):
    """Runs a detector; each camera keeps ``requests`` inferences in flight.

    Every frame gets ``frame.attrs[(name, DETECTION_RAN)]``: True when the model ran on it.
    It runs on frames 0, N, 2N, ... of each source (``every: N``, as DL Streamer's
    ``inference-interval``), counted over the frames whose gates are open (``GATE``
    attributes, e.g. from a motion stage; none: open); a closed gate restarts the count, so
    the first frame a gate opens (motion, a refresh) is always detected.
    """

    provides: ClassVar[frozenset[str]] = frozenset({"detections"})

    class Params(InferParams, DetectorSettings):
        decoder: str | None = Field(  # type: ignore[assignment]
            None, description="output decoder (model family); default: recognised from the model's outputs "
            "and metadata (yolo, yolov5, yolox, yolo_end2end, ssd)")
        every: int = Field(1, ge=1, description="run the model on frames 0, N, 2N, ... (N=1: every frame); others "
                           "pass unchanged")
        resize: Literal["auto", "host", "engine"] | None = Field(
            None, description="where the frame is scaled to the model's input: host (from the decoder's planes "
            "or the converted image), engine (full-size uint8 frame, resized inside the compiled model), or auto "
            "(both measured on the first frame of each size; the faster is kept); default: where the model "
            "family's reference scales (engine for yolo, yolov5, yolo_end2end and ssd as model_api does, host "
            "with OpenCV on the full frame for yolox), auto for the others; the engine default scales with "
            "OpenCV on the full frame instead where that gives the same pixels (both sides shrinking by odd "
            "whole factors or both by 2, e.g. 1920x1080 or 1280x720 into 640x360)")

        @field_validator("decoder")
        @classmethod
        def _known_decoder(cls, value: str | None) -> str | None:
            if value is not None:
                adapter_class("detector", value, DetectorAdapter)
            return value

        @model_validator(mode="after")
        def _options_the_decoder_takes(self) -> "Detect.Params":
            """A fixed family's options are checked when the parameters are (a bad value is an
            error of the file or the request, not of the run's first frame)."""
            if self.decoder is not None and self.options and self.decoder not in _generic_families():
                try:
                    make_adapter("detector", self.decoder, self.options, DetectorAdapter)
                except ValueError as exc:
                    raise ValueError(f"options: {exc}") from None
            return self

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The model-driven families scale the full-size frame by default (inside the compiled
        # model, or with OpenCV): the decoder thread then converts each frame once.
        generic = self.params.decoder is None or self.params.decoder in _generic_families()
        self.needs_image = self.params.resize is None and generic  # type: ignore[misc]

    def open(self) -> None:
        from pipeline.models import resolve_model

        self.model_path = resolve_model(self.params.model)
        try:
            self.adapter: DetectorAdapter = detector_adapter(self.params, self.model_path)
        except FamilyError as exc:  # the model and the decoder disagree: say which stage
            raise FamilyError(f"stage {self.name!r}: {exc}") from None
        if hasattr(self.adapter, "describe"):
            log.info("%s: %s", self.name, self.adapter.describe())
        self._routes: dict[tuple[int, int], _Route] = {}
        self._count = getattr(self, "_count", 0)  # kept when the stage is reconfigured mid-run
        #: per source: frames with open gates since the last closed one (the every-N phase)
        self._open_run: dict[str, int] = getattr(self, "_open_run", {})
        #: chosen path per source size, with the measured milliseconds per frame of each candidate
        self.choices: dict[tuple[int, int], tuple[str, dict[str, float]]] = {}
        if not hasattr(self.adapter, "input_size"):
            self._load(None)  # fixed input size: compile now, so errors surface at open

    def close(self) -> None:
        for route in getattr(self, "_routes", {}).values():
            route.pool.drain()
        self._routes = {}

    def _load(self, spec_size: tuple[int, int] | None, **engine_resize: Any) -> LoadedModel:
        return load_model(self.params.engine, self.model_path, _input_spec(self.adapter, spec_size, **engine_resize),
                          self.params.device, self.params.hint, self.params.config)

    def _route_for(self, frame: Frame) -> _Route:
        src_wh = (frame.width, frame.height)
        route = self._routes.get(src_wh)
        if route is not None:
            return route
        size = self.adapter.input_size(src_wh) if hasattr(self.adapter, "input_size") else None
        candidates = _route_candidates(self.params, self.adapter, src_wh, lambda: self._model_hw(size))
        routes = {name: self._make_route(name, size, src_wh) for name in candidates}
        if len(routes) == 1:
            chosen, timings = candidates[0], {}
            if chosen == _HOST_EXACT:
                log.info("%s: %dx%d frames -> host resize (OpenCV gives the pixels the engine would)",
                         self.name, *src_wh)
        else:
            timings = {name: r.measure(frame, self.adapter) for name, r in routes.items()}
            chosen = min(timings, key=timings.__getitem__)
            log.info("%s: %dx%d frames -> %s resize (%s)", self.name, *src_wh, chosen,
                     ", ".join(f"{k} {v:.2f} ms" for k, v in timings.items()))
        self.choices[src_wh] = (chosen, timings)
        route = routes[chosen]
        self._routes[src_wh] = route
        self.depth = route.pool.size
        return route

    def _model_hw(self, size: tuple[int, int] | None) -> tuple[int, int]:
        """The model's input (height, width) for frames the adapter sizes as ``size``."""
        return size or _static_hw(self.adapter) or self._load(None).input_hw

    def _make_route(self, kind: str, size: tuple[int, int] | None, src_wh: tuple[int, int]) -> _Route:
        if kind != "engine":
            model = self._load(size)
            return _Route(model, self._pool_for(model),
                          _host_prepare(self.adapter, kind))
        box = _letterbox(self.adapter, src_wh, self._model_hw(size))
        model = self._load(size, **_engine_resize(self.adapter, src_wh, box))
        return _Route(model, self._pool_for(model),
                      lambda frame, hw: (frame.image(), box))

    def planning_probe(self, source_wh: tuple[int, int]) -> ModelProbe:
        from pipeline.models import resolve_model

        path = resolve_model(self.params.model)
        adapter = detector_adapter(self.params, path)
        size = adapter.input_size(source_wh) if hasattr(adapter, "input_size") else None
        spec = adapter.input_spec
        model_hw = size or _static_hw(adapter)
        if model_hw is not None and _route_candidates(self.params, adapter, source_wh, lambda: model_hw) == ["engine"]:
            # the model as the engine route feeds it: full-size frames, scaled inside
            spec = _input_spec(adapter, size, **_engine_resize(adapter, source_wh,
                                                               _letterbox(adapter, source_wh, model_hw)))
        return ModelProbe(self.name, path, spec, self.params.device,
                          self.params.hint, dict(self.params.config), input_hw=size,
                          per_frame=1.0 / self.params.every, engine=self.params.engine)

    def planning_host(self, frame: Frame, input_hw: tuple[int, int]) -> Callable[[], Any]:
        adapter = detector_adapter(self.params)
        src_wh = (frame.width, frame.height)
        hw = adapter.input_size(src_wh) if hasattr(adapter, "input_size") else input_hw
        kind = _route_candidates(self.params, adapter, src_wh, lambda: hw)[0]
        prepare_input = _host_prepare(adapter, kind)
        # the exact host route reads the full-size frame the decoder thread converts; the
        # plain host route scales the decoder's planes (or the image of a frame without them)
        image = frame.image() if kind == _HOST_EXACT or frame.av_frame is None else None

        def prepare() -> Any:
            # a fresh frame each time: frames cache their scaled copies
            probe = Frame(frame.source_id, frame.seq, frame.width, frame.height, av_frame=frame.av_frame,
                          _image=image)
            return None if kind == "engine" else prepare_input(probe, hw)

        return prepare

    def wants(self, frame: Frame) -> bool:
        self._count += 1
        if all(attr_values(frame, GATE)):
            k = self._open_run.get(frame.source_id, 0)
            self._open_run[frame.source_id] = k + 1
            run = k % self.params.every == 0
        else:
            self._open_run[frame.source_id] = 0
            run = False
        frame.attrs[(self.name, DETECTION_RAN)] = run
        return run

    def counters(self) -> dict[str, Any]:
        return {"frames_inferred": self.inferences, "frames_passed": getattr(self, "_count", 0) - self.inferences}

    def start(self, frame: Frame) -> Any:
        route = self._route_for(frame)
        hw = route.model.input_hw
        image, box = route.prepare(frame, hw)
        adapter = self.adapter
        job = route.pool.start(image, lambda outs: adapter.decode(outs, hw))
        self.inferences += 1
        return route.pool, job, box

    def is_done(self, ticket: Any) -> bool:
        pool, job, _ = ticket
        return pool.is_done(job)

    def _pool_for(self, model: LoadedModel) -> RequestPool:
        pool = model.create_pool(self.params.requests, self.priority)
        pool.decoder = self.params.decoder  # named when the outputs do not fit it
        return pool

    def complete(self, frame: Frame, ticket: Any) -> Frame:
        pool, job, box = ticket
        found: Detections = pool.finish(job)
        found = box.detections_to_source(found, (frame.width, frame.height))
        frame.detections = Detections.merge([frame.detections, found]) if len(frame.detections) else found
        return frame


def _generic_families() -> tuple[str, ...]:
    from .models import load_adapters
    from .models.detector_base import GENERIC_FAMILIES

    load_adapters()
    return tuple(GENERIC_FAMILIES)


#: the host route on the full-size BGR frame, where OpenCV gives the engine's pixels
_HOST_EXACT = "host (engine's pixels)"


def _route_candidates(params: Detect.Params, adapter: DetectorAdapter, src_wh: tuple[int, int],
                      model_hw: Callable[[], tuple[int, int]]) -> list[str]:
    """How frames of (width, height) ``src_wh`` may reach the model (``model_hw()``: its input
    (height, width), asked only when needed): one route, or ``["host", "engine"]`` to measure
    both (``resize: auto``).  The engine route a family prefers by default becomes
    :data:`_HOST_EXACT` where the host gives the same pixels
    (:func:`pipeline.resize_match.opencv_matches_engine`)."""
    own_sampling = type(adapter).prepare_input is not DetectorAdapter.prepare_input
    mode = params.resize or adapter.resize_preference
    if params.engine != "openvino":  # only OpenVINO resizes inside the model
        return ["host"]
    if mode == "auto":
        return ["host"] if own_sampling else ["host", "engine"]
    if mode == "engine" and params.resize is None and not own_sampling:
        inner = _letterbox(adapter, src_wh, model_hw()).inner
        if opencv_matches_engine(src_wh, inner):
            return [_HOST_EXACT]
    return [mode]


def _letterbox(adapter: DetectorAdapter, src_wh: tuple[int, int], model_hw: tuple[int, int]) -> Letterbox:
    return Letterbox.fit(src_wh, (model_hw[1], model_hw[0]), adapter.letterbox, adapter.letterbox_align)


def _engine_resize(adapter: DetectorAdapter, src_wh: tuple[int, int], box: Letterbox) -> dict[str, Any]:
    """InputSpec fields of the engine route: full-size frames scaled and padded inside the model."""
    return dict(resize_from=(src_wh[1], src_wh[0]), inner=(box.inner[1], box.inner[0]),
                pad_top_left=(int(box.pad_y), int(box.pad_x)), pad_value=float(adapter.pad_value))


def _input_spec(adapter: DetectorAdapter, spec_size: tuple[int, int] | None, **engine_resize: Any) -> InputSpec:
    base: InputSpec = adapter.input_spec
    spec = replace(base, size=spec_size if spec_size is not None else base.size, **engine_resize)
    if engine_resize:
        spec = replace(spec, host_color="BGR")  # full-size frames come as BGR (frame.image())
    return spec


def _static_hw(adapter: DetectorAdapter) -> tuple[int, int] | None:
    """The model's fixed input (height, width), if the adapter knows it without compiling."""
    hw = getattr(getattr(adapter, "info", None), "input_hw", None)
    return tuple(hw) if hw is not None and min(hw) > 0 else None  # type: ignore[return-value]


#: host-side input preparation: (frame, model input (height, width)) -> (uint8 input, its letterbox)
Prepare = Callable[[Frame, tuple[int, int]], tuple[np.ndarray, Letterbox]]


def _host_prepare(adapter: DetectorAdapter, kind: str) -> Prepare:
    """The host-side input preparation of route ``kind`` ("host" or :data:`_HOST_EXACT`)."""
    if kind != _HOST_EXACT:
        return adapter.host_input
    return lambda frame, hw: adapter.host_input(frame, hw, like_engine=True)


def detector_adapter(params: Detect.Params, model_path: Any = None) -> DetectorAdapter:
    """The adapter a detect stage with ``params`` uses (the model's family, labels, thresholds
    and preprocessing); ``model_path`` defaults to ``params.model`` resolved.  Tools that
    feed the detector themselves (benchmarks, quantisation) build their inputs with it."""
    from pipeline.models import resolve_model

    from .models.families import build_detector

    path = model_path if model_path is not None else resolve_model(params.model)
    return build_detector(path, params.decoder, params.options, params.generic_fields_set())


@dataclass
class _Route:
    """One way of feeding the model for one source size: a compiled model, the
    camera's request pool on it, and the host-side input preparation."""

    model: LoadedModel
    pool: RequestPool
    prepare: Prepare

    def measure(self, frame: Frame, adapter: DetectorAdapter, repeats: int = 5) -> float:
        """Median milliseconds for prepare + infer + decode on ``frame``, counting the
        full-size conversion when the frame has not been converted yet."""
        hw = self.model.input_hw
        convert = not frame.has_image and frame.av_frame is not None
        times = []
        for _ in range(repeats):
            probe = Frame(frame.source_id, frame.seq, frame.width, frame.height, av_frame=frame.av_frame,
                          _image=None if convert else frame.image())
            t0 = time.perf_counter()
            image, _ = self.prepare(probe, hw)
            self.pool.run(image, lambda outs: adapter.decode(outs, hw))
            times.append((time.perf_counter() - t0) * 1000)
        return float(np.median(times))
