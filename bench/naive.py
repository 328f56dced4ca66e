"""The ``naive`` mode: the loop users write first.

``cv2.VideoCapture.read`` (full-size BGR), the model input built on the host with the
pipeline's own geometry, float normalisation on the host, synchronous ``infer`` on
models compiled with the device's defaults (plus the stages' non-thread properties),
outputs decoded with the pipeline's adapters.  Region models run one crop after the
other, stage after stage, on the objects they select.  N cameras: N threads, each
with its own capture and requests on shared compiled models.
"""

from __future__ import annotations

import time
from typing import Any

from pipeline.frame import Frame

from .chain import CompiledPart, compile_chain, compile_plain, outputs, selected
from .measure import Cameras, write_records
from .plan import BenchError, BenchPlan
from .recorder import detection_objects

__all__ = ["run_naive"]


def _infer(request: Any, model: CompiledPart, image: Any) -> list[Any]:
    """Synchronous inference on ``image`` (u8 (H, W, 3)), normalised on the host."""
    from pipeline.ort_engine import preprocess

    request.infer({0: preprocess(image[None], model.part.adapter.input_spec, model.nchw)})
    return outputs(request, model.n_outputs)


def run_naive(plan: BenchPlan) -> dict[str, Any]:
    import cv2

    _, det, regions = compile_chain(plan, compile_plain)
    cams = Cameras(plan.cameras, plan.record_frames)

    def camera(cam: int) -> None:
        try:
            det_req = det.compiled.create_infer_request()
            reg_reqs = [r.compiled.create_infer_request() for r in regions]
            det_ad = det.part.adapter
            cap = cv2.VideoCapture(plan.source)
            if not cap.isOpened():
                raise BenchError(f"naive: cv2.VideoCapture cannot open {plan.source}")
            n = 0
            while n < plan.frames:
                ok, img = cap.read()
                if not ok:
                    cap.release()
                    if not plan.loop or n == 0:
                        break
                    cap = cv2.VideoCapture(plan.source)
                    continue
                t0 = time.perf_counter()
                frame = Frame.from_image(img)  # full-size BGR: every scaling is OpenCV on it, as a user does
                x, box = det_ad.host_input(frame, det.input_hw)
                dets = box.detections_to_source(det_ad.decode(_infer(det_req, det, x), det.input_hw),
                                                (frame.width, frame.height))
                for model, req in zip(regions, reg_reqs):
                    ad = model.part.adapter
                    for i in selected(dets, model.part):
                        crop, ctx = ad.prepare(frame, dets, i, model.input_hw)
                        ad.apply(dets, i, ad.decode(_infer(req, model, crop), ctx))
                cams.done(cam, n, t0, lambda: detection_objects(dets, n))
                n += 1
            cap.release()
        except BaseException as exc:  # noqa: BLE001 - reported by the worker
            cams.fail(exc)

    cams.run(camera)
    write_records(plan.out, "naive", cams.recorder.records)
    return cams.clock.result()
