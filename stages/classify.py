"""A second model on regions of interest: one crop per object of chosen labels.

Crops of one frame are started together (each on its own infer request, up
to ``requests`` in flight per camera); results are written into the objects
(``attributes``, ``keypoints``) by the adapter.  Objects of other labels are
left alone; a stage that ends without one object of its ``on`` labels while
others came says so in a warning naming the labels that came (a misspelt ``on``).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from pipeline.costs import ModelProbe
from pipeline.engine import InputSpec, LoadedModel, RequestPool
from pipeline.engines import load_model
from pipeline.frame import TRACK_BOXES, TRACKS_ENDED, Frame, attr_values
from pipeline.stage import InferStage

from ._infer_common import InferParams, adapter_class, make_adapter
from ._label_watch import LabelWatch
from ._reclassify import ReclassifyCache, reclassified_share
from .model_settings import ClassifierSettings
from .models.base import RoiAdapter


MAX_AUTO_REQUESTS = 16
log = logging.getLogger("vapipe")


class Classify(InferStage):
    """Runs a model on the crop of every object whose label is in ``on``."""

    @property
    def needs_image(self) -> bool:  # type: ignore[override]
        """Whether crops are cut from full-size BGR pixels (the adapter says; default yes)."""
        from stages.models import DECODERS, load_adapters

        load_adapters()
        return bool(getattr(DECODERS.get(self.params.decoder), "needs_image", True))

    class Params(InferParams, ClassifierSettings):
        on: list[str] = Field(description="object labels to run on, e.g. [face]")
        max_objects: int = Field(32, ge=1, description="at most this many objects per frame (highest scores first)")
        reclassify: int = Field(1, ge=0, description="run on a tracked object every N frames (1: every frame; 0: "
                                "once per track); in between it keeps its last results (positions such as landmarks "
                                "move with its box); needs a track stage before")

        @field_validator("decoder")
        @classmethod
        def _known_decoder(cls, value: str) -> str:
            adapter_class("region", value, RoiAdapter)
            return value

    params: Params

    @classmethod
    def requires(cls, params: dict[str, Any]) -> dict[str, str]:
        needs = {"detections": "on"}  # the objects it runs on
        if params.get("reclassify", 1) != 1:
            needs["tracks"] = "reclassify"
        return needs

    def open(self) -> None:
        from pipeline.models import resolve_model

        path = resolve_model(self.params.model)
        self.adapter: RoiAdapter = region_adapter(self.params, path)
        spec: InputSpec = self.adapter.input_spec
        model: LoadedModel = load_model(self.params.engine, path, spec, self.params.device, self.params.hint,
                                        self.params.config)
        self.model = model
        if hasattr(self.adapter, "bind_model"):
            self.adapter.bind_model(model)
        n = self.params.requests or max(2, model.optimal_requests)
        self.pool: RequestPool = model.create_pool(n, self.priority)
        self.pool.decoder = self.params.decoder  # named when the outputs do not fit it
        self.depth = n
        self.reuse = ReclassifyCache(self.params.reclassify) if self.params.reclassify != 1 else None
        self.labels_seen = LabelWatch(self.name, "on", self.params.on)

    def close(self) -> None:
        if hasattr(self, "pool"):
            self.pool.drain()
        if hasattr(self, "labels_seen"):
            self.labels_seen.warn_if_unmatched()

    def planning_probe(self, source_wh: tuple[int, int]) -> ModelProbe:
        from pipeline.models import resolve_model

        path = resolve_model(self.params.model)
        adapter = region_adapter(self.params, path)
        # a region model's inferences per frame are the objects earlier stages find: unknown here
        return ModelProbe(self.name, path, adapter.input_spec, self.params.device,
                          self.params.hint, dict(self.params.config),
                          input_hw=getattr(adapter, "typical_input_hw", None), per_frame=None,
                          engine=self.params.engine, per_object=reclassified_share(self.params.reclassify))

    def start(self, frame: Frame) -> Any:
        dets = frame.detections
        idx = dets.with_label(self.params.on)
        self.labels_seen.see(dets.label, len(idx))
        idx = _inside(dets.xyxy, idx, frame.width, frame.height)  # no pixels to classify: left as they are
        if len(idx) > self.params.max_objects:
            idx = idx[(-dets.score[idx]).argsort(kind="stable")[: self.params.max_objects]]
        if not self.params.requests and len(idx) * self.depth > self.pool.size:
            # Enough requests for every crop of the frames in flight, so that starting a
            # crop never waits for an older frame's crops (at most MAX_AUTO_REQUESTS).
            self.pool.grow(min(MAX_AUTO_REQUESTS, len(idx) * self.depth))
        jobs = []
        adapter = self.adapter
        reuse = self.reuse
        if reuse is not None:
            for ended in attr_values(frame, TRACKS_ENDED):
                reuse.forget(frame.source_id, ended)
        for i in idx:
            tid = int(dets.track_id[i])
            if reuse is not None and tid >= 0 and not reuse.due(frame.source_id, tid, frame.seq):
                jobs.append((int(i), None))  # keeps the result of an earlier frame
                continue
            crop, ctx = adapter.prepare(frame, dets, int(i), self.model.input_hw)
            jobs.append((int(i), self.pool.start(crop, lambda outs, ctx=ctx: adapter.decode(outs, ctx))))
            self.inferences += 1
        return jobs

    def is_done(self, ticket: Any) -> bool:
        return all(job is None or self.pool.is_done(job) for _, job in ticket)

    def has_work(self, ticket: Any) -> bool:
        return ticket is not None and any(job is not None for _, job in ticket)

    def complete(self, frame: Frame, ticket: Any) -> Frame:
        dets = frame.detections
        estimates = {tid: box for boxes in attr_values(frame, TRACK_BOXES) for tid, box in boxes.items()} \
            if self.reuse is not None else {}  # only carried results use them
        for i, job in ticket:
            tid = int(dets.track_id[i])
            if job is None:
                kept = self.reuse.carry_boxes(frame.source_id, tid, dets.xyxy[i], estimates.get(tid)) \
                    if self.reuse is not None else None
                if kept is not None:
                    self.adapter.apply(dets, i, self.adapter.carry(*kept))
                continue
            result = self.pool.finish(job)
            self.adapter.apply(dets, i, result)
            if self.reuse is not None and tid >= 0:
                self.reuse.store(frame.source_id, tid, result, dets.xyxy[i], estimates.get(tid))
        return frame


def region_adapter(params: Classify.Params, model_path: Any) -> RoiAdapter:
    """The adapter a classify stage with ``params`` uses on the model at ``model_path``:
    model-driven ones (``attributes``) read the model's outputs and metadata."""
    cls = adapter_class("region", params.decoder, RoiAdapter)
    settings = params.generic_fields_set()
    if getattr(cls, "reads_model", False):
        from .models.model_info import read_model_info

        return cls(read_model_info(model_path), settings, params.options)
    if settings:
        raise ValueError(f"decoder {params.decoder!r} does not take {', '.join(settings)} (those are for the "
                         "attributes decoder); set its own options: instead")
    return make_adapter("region", params.decoder, params.options, RoiAdapter)


def _inside(xyxy: np.ndarray, idx: np.ndarray, width: int, height: int) -> np.ndarray:
    """The indices of ``idx`` whose boxes in ``xyxy`` (N, 4) cover some of the ``width`` x
    ``height`` frame: finite, not inverted, not wholly outside.  Runs for every frame a region
    model sees, on a handful of boxes: plain Python floats cost a third of array operations."""
    keep = [all(map(math.isfinite, (x1, y1, x2, y2))) and min(x2, width) > max(x1, 0)
            and min(y2, height) > max(y1, 0) for x1, y1, x2, y2 in xyxy[idx].tolist()]
    return idx if all(keep) else idx[np.array(keep, bool)]
