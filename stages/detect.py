"""Object detection on whole frames with an OpenVINO model.

The frame is scaled (letterboxed or stretched, as the model family needs)
straight from the decoder's planes to the model's input size as uint8; colour
order, float conversion and normalisation run inside the compiled model.
Detections are added to ``frame.detections`` in source pixels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from pipeline.engine import InputSpec, LoadedModel, RequestPool, get_engine
from pipeline.frame import Detections, Frame
from pipeline.stage import InferStage

from ._infer_common import InferParams, make_adapter
from .models.base import DetectorAdapter, Letterbox


class Detect(InferStage):
    """Runs a detector; each camera keeps ``requests`` inferences in flight."""

    class Params(InferParams):
        every: int = Field(1, ge=1, description="run the model on every N-th frame; others pass unchanged")

    params: Params

    def open(self) -> None:
        from pipeline.models import resolve_model

        self.adapter: DetectorAdapter = make_adapter("detector", self.params.decoder, self.params.options,
                                                     DetectorAdapter)
        self.model_path = resolve_model(self.params.model)
        self._models: dict[tuple[int, int], tuple[LoadedModel, RequestPool]] = {}
        self._count = 0
        if not hasattr(self.adapter, "input_size"):
            self._model_for((0, 0))  # fixed input size: compile now, errors surface at open

    def close(self) -> None:
        for _, pool in getattr(self, "_models", {}).values():
            pool.drain()
        self._models = {}

    def _model_for(self, src_wh: tuple[int, int]) -> tuple[LoadedModel, RequestPool]:
        size = self.adapter.input_size(src_wh) if hasattr(self.adapter, "input_size") else None
        key = size or (0, 0)
        hit = self._models.get(key)
        if hit is None:
            spec: InputSpec = self.adapter.input_spec
            if size is not None:
                spec = InputSpec(spec.host_color, spec.model_color, spec.mean, spec.scale, size=size)
            model = get_engine().load(self.model_path, spec, self.params.device, self.params.hint,
                                      self.params.config)
            hit = (model, model.create_pool(self.params.requests))
            self._models[key] = hit
            self.depth = hit[1].size
        return hit

    def wants(self, frame: Frame) -> bool:
        self._count += 1
        return (self._count - 1) % self.params.every == 0

    def start(self, frame: Frame) -> Any:
        src_wh = (frame.width, frame.height)
        model, pool = self._model_for(src_wh)
        h, w = model.input_hw
        prepared = self.adapter.prepare_input(frame, (h, w))
        if prepared is not None:
            image, box = prepared
        else:
            box = Letterbox.fit(src_wh, (w, h), self.adapter.letterbox)
            fmt = "rgb24" if self.adapter.input_spec.host_color == "RGB" else "bgr24"
            inner = frame.resized(box.inner[0], box.inner[1], fmt)
            if box.inner != (w, h):
                image = np.full((h, w, 3), self.adapter.pad_value, np.uint8)
                image[box.pad_y:box.pad_y + inner.shape[0], box.pad_x:box.pad_x + inner.shape[1]] = inner
            else:
                image = inner
        adapter = self.adapter
        job = pool.start(image, lambda outs: adapter.decode(outs, (h, w)))
        return pool, job, box

    def is_done(self, ticket: Any) -> bool:
        pool, job, _ = ticket
        return pool.is_done(job)

    def complete(self, frame: Frame, ticket: Any) -> Frame:
        pool, job, box = ticket
        found: Detections = pool.finish(job)
        found = box.detections_to_source(found, (frame.width, frame.height))
        frame.detections = Detections.merge([frame.detections, found]) if len(frame.detections) else found
        return frame
