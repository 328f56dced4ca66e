"""Ultralytics' own exports and predictions, for the detector check in
``tests/stages/test_ultralytics_exports.py``.

Runs in an environment with Ultralytics (``make ultralytics``: its own venv, as Ultralytics
needs PyTorch); imports nothing of vapipe.  ``python ultralytics_exports.py OUT FRAMES.npy``:

* builds each architecture of :data:`ARCHS` from Ultralytics' model YAML, with its batch
  norms calibrated on the frames (random weights otherwise fade to zero through the
  layers and every score equals the class bias) and the class head's last layer drawn
  so that a few to a few hundred boxes per frame pass 0.25: real exports of real
  graphs whose boxes have no meaning but vary with the picture;
* exports every variant of :data:`VARIANTS` (OpenVINO and ONNX; square, non-square,
  dynamic, FP16, ``nms=True``, the NMS-free ``nms=False`` head);
* runs Ultralytics' predictor on each export, on the frames resized to the export's
  input size, and writes ``OUT/ultralytics.json``: ``{name: {"path", "size": [h, w],
  "frames": [{"xyxy", "score", "cls"}, ...]}}``, and the resized frames themselves as
  ``OUT/frames-HxW.npy`` (so both sides read the very same pixels).

OpenVINO models run at f32 in Ultralytics (its compile call is given the hint), as vapipe's
side does: what is compared is the decoding, not two precisions.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np

#: Ultralytics model YAMLs (random weights; the n scale of each generation)
ARCHS = ("yolov5n", "yolov8n", "yolov10n", "yolo11n", "yolo26n")
#: export arguments per variant name
VARIANTS: dict[str, dict[str, Any]] = {
    "openvino": {"format": "openvino"},
    "openvino-384x640": {"format": "openvino", "imgsz": [384, 640]},
    "openvino-480x320": {"format": "openvino", "imgsz": [480, 320]},
    "openvino-dynamic": {"format": "openvino", "dynamic": True},
    "openvino-fp16": {"format": "openvino", "half": True},
    "openvino-nms": {"format": "openvino", "nms": True},
    "openvino-nms-free": {"format": "openvino", "nms": False},
    "onnx": {"format": "onnx"},
    "onnx-dynamic-320x480": {"format": "onnx", "imgsz": [320, 480], "dynamic": True},
    "onnx-nms-free": {"format": "onnx", "nms": False},
}
CONF, IOU, MAX_DET = 0.25, 0.7, 300


def _f32_openvino() -> None:
    import openvino as ov

    compile_model = ov.Core.compile_model

    def compile_f32(self: Any, model: Any, device_name: str | None = None, config: dict | None = None) -> Any:
        return compile_model(self, model, device_name or "CPU", {**(config or {}), "INFERENCE_PRECISION_HINT": "f32"})

    ov.Core.compile_model = compile_f32


def calibrated(arch: str, frames: np.ndarray) -> Any:
    """``arch`` with batch norms fitted to ``frames`` and a class head that scores some boxes."""
    import torch
    from ultralytics import YOLO

    torch.manual_seed(0)
    model = YOLO(f"{arch}.yaml")
    net = model.model
    batch = torch.stack([torch.from_numpy(cv2.resize(f, (640, 640))[:, :, ::-1].copy()).permute(2, 0, 1)
                         for f in frames]).float() / 255
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None  # a plain average over the batch
    net.train()
    with torch.no_grad():
        net(batch)
    net.eval()
    head = net.model[-1]
    for name in ("cv3", "one2one_cv3"):
        for branch in getattr(head, name, None) or []:
            torch.nn.init.normal_(branch[-1].weight, 0.0, 0.05)
            branch[-1].bias.data[:] = -4.5
    return model


def export_all(out: Path, frames: np.ndarray) -> dict[str, Any]:
    from ultralytics import YOLO

    _f32_openvino()
    models = out / "models"
    models.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for arch in ARCHS:
        model = calibrated(arch, frames)  # each export works on its own copy of the network
        for variant, args in VARIANTS.items():
            name = f"{arch}-{variant}"
            exported = Path(model.export(**args, verbose=False))
            dst = models / (f"{name}.onnx" if args["format"] == "onnx" else f"{name}_openvino_model")
            shutil.rmtree(dst, ignore_errors=True)
            dst.unlink(missing_ok=True)
            shutil.move(str(exported), dst)
            h, w = args.get("imgsz", [640, 640])
            predictor = YOLO(str(dst), task="detect")
            # Ultralytics predicts a dynamic model at 640 unless told; the export's size is the intent
            extra = {"imgsz": [h, w]} if args.get("dynamic") else {}
            sized = np.stack([cv2.resize(f, (w, h), interpolation=cv2.INTER_AREA) for f in frames])
            np.save(out / f"frames-{h}x{w}.npy", sized)
            per_frame = []
            for image in sized:
                boxes = predictor.predict(image, conf=CONF, iou=IOU, max_det=MAX_DET, verbose=False, **extra)[0].boxes
                per_frame.append({"xyxy": boxes.xyxy.numpy().tolist(), "score": boxes.conf.numpy().tolist(),
                                  "cls": boxes.cls.numpy().astype(int).tolist()})
            results[name] = {"path": str(dst), "size": [h, w], "frames": per_frame}
            print(name, sum(len(f["score"]) for f in per_frame), "boxes", flush=True)
    (out / "ultralytics.json").write_text(json.dumps(results))
    return results


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python ultralytics_exports.py OUT_DIR FRAMES.npy")
    export_all(Path(sys.argv[1]), np.load(sys.argv[2]))
