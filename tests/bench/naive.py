"""The loop a user writes by hand: cv2.VideoCapture, host preprocessing, synchronous infer.

Same model and the same letterboxed 224x224 input as the ``persons`` pipeline;
decoding of outputs is the same adapter, so the work differs only in how it
is scheduled and where pixels are converted.
"""

from __future__ import annotations

import sys
import time

import cv2
import numpy as np
import openvino as ov


def run(video: str, model_path: str, max_frames: int | None = None) -> dict[str, float]:
    from stages.models.base import Letterbox
    from stages.models.pose import PoseDetector

    core = ov.Core()
    compiled = core.compile_model(model_path, "CPU")
    request = compiled.create_infer_request()
    adapter = PoseDetector()
    cap = cv2.VideoCapture(video)
    n = 0
    t0 = time.perf_counter()
    while True:
        ok, img = cap.read()
        if not ok or (max_frames is not None and n >= max_frames):
            break
        h, w = img.shape[:2]
        box = Letterbox.fit((w, h), (224, 224), True)
        small = cv2.resize(img, box.inner, interpolation=cv2.INTER_LINEAR)
        canvas = np.zeros((224, 224, 3), np.uint8)
        canvas[box.pad_y:box.pad_y + small.shape[0], box.pad_x:box.pad_x + small.shape[1]] = small
        x = cv2.cvtColor(canvas, cv2.COLOR_BGR2RGB).astype(np.float32) / 127.5 - 1.0
        request.infer({0: x[None]})
        outs = [request.get_output_tensor(i).data for i in range(len(compiled.outputs))]
        dets = adapter.decode(outs, (224, 224))
        box.detections_to_source(dets, (w, h))
        n += 1
    dt = time.perf_counter() - t0
    cap.release()
    return {"frames": n, "fps": n / dt if dt else 0.0}


if __name__ == "__main__":
    print(run(sys.argv[1], sys.argv[2]))
