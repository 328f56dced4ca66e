"""Small OpenVINO models built with the opset API for tests that need no shared folder.

``constant_model`` answers every input with fixed output tensors (the decoders' input
is then known exactly); ``identity_model`` returns its (preprocessed) input, so a test
can read what the engine fed the model; ``detection_output_model`` is an SSD ending in a
real ``DetectionOutput`` op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import openvino as ov
import yaml
from openvino import opset8
from openvino import opset13 as ops

__all__ = ["constant_model", "identity_model", "detection_output_model", "yolo_head", "write_onnx"]


def _input(shape: Sequence[int], name: str) -> Any:
    dims = [ov.Dimension() if d < 0 else ov.Dimension(d) for d in shape]
    return ops.parameter(ov.PartialShape(dims), np.float32, name=name)


def _save(model: Any, path: Path, rt_info: Mapping[str, Any] | None) -> Path:
    for key, value in (rt_info or {}).items():
        model.set_rt_info(value, ["model_info", key])
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


def constant_model(path: Path, outputs: Mapping[str, np.ndarray], input_shape: Sequence[int] = (1, 3, 64, 64),
                   input_name: str = "images", rt_info: Mapping[str, Any] | None = None,
                   ultralytics: Mapping[str, Any] | None = None) -> Path:
    """An IR at ``path`` whose outputs (named as the keys) are the given arrays, whatever
    the input (-1 in ``input_shape`` makes a dimension dynamic).  ``rt_info`` goes under
    ``model_info``; ``ultralytics`` is written as ``metadata.yaml`` beside the IR."""
    image = _input(input_shape, input_name)
    zero = ops.multiply(ops.reduce_mean(image, ops.constant(np.arange(len(input_shape))), False),
                        ops.constant(np.float32(0)))
    results = []
    for name, value in outputs.items():
        node = ops.add(ops.constant(np.asarray(value, np.float32)), zero)
        node.output(0).get_tensor().set_names({name})
        results.append(node)
    model = ov.Model(results, [image], "synthetic")
    if ultralytics is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "metadata.yaml").write_text(yaml.safe_dump(dict(ultralytics)), encoding="utf-8")
    return _save(model, path, rt_info)


def identity_model(path: Path, input_shape: Sequence[int] = (1, 3, 48, 64), name: str = "image") -> Path:
    """An IR whose single output is its input (NCHW float)."""
    image = _input(input_shape, name)
    out = ops.multiply(image, ops.constant(np.float32(1)))
    out.output(0).get_tensor().set_names({"same"})
    return _save(ov.Model([out], [image], "identity"), path, None)


def detection_output_model(path: Path, scores: Sequence[float], batch: int = 1) -> Path:
    """An IR on a [``batch``, 3, 32, 32] input ``data`` (-1: dynamic batch) ending in an opset-8
    ``DetectionOutput`` (class 0 the background) with one prior, [0.25, 0.25, 0.75, 0.5]
    (normalised corners), zero offsets and the class ``scores``."""
    image = _input([batch, 3, 32, 32], "data")
    per_image = ops.reshape(ops.reduce_mean(image, ops.constant([1, 2, 3]), True),
                            ops.constant(np.array([-1, 1], np.int64)), False)
    zero = ops.multiply(per_image, ops.constant(np.float32(0)))
    loc = ops.add(ops.constant(np.zeros((1, 4), np.float32)), zero)
    conf = ops.add(ops.constant(np.asarray([scores], np.float32)), zero)
    priors = ops.constant(np.array([[0.25, 0.25, 0.75, 0.5], [0.1, 0.1, 0.2, 0.2]], np.float32).reshape(1, 2, 4))
    attrs = {"keep_top_k": [10], "nms_threshold": 0.45, "background_label_id": 0, "top_k": 10,
             "share_location": True, "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "normalized": True,
             "confidence_threshold": 0.01, "variance_encoded_in_target": False}
    out = opset8.detection_output(loc, conf, priors, attrs)
    out.output(0).get_tensor().set_names({"detection_out"})
    return _save(ov.Model([out], [image], "detection_output"), path, None)


def yolo_head(boxes_xywh: Sequence[Sequence[float]], scores: Sequence[Sequence[float]], anchors: int,
              channels_first: bool = True, objectness: Sequence[float] | None = None,
              background: float = 0.0) -> np.ndarray:
    """A [1, C, N] (or [1, N, C]) head with the given rows first and ``background`` elsewhere:
    C = 4 (+1 objectness) + classes."""
    scores = np.asarray(scores, np.float32)
    k, nc = scores.shape
    c = 4 + (objectness is not None) + nc
    rows = np.full((anchors, c), background, np.float32)
    rows[:, :4] = 1.0
    rows[:k, :4] = np.asarray(boxes_xywh, np.float32)
    col = 4
    if objectness is not None:
        rows[:k, 4] = np.asarray(objectness, np.float32)
        col = 5
    rows[:k, col:] = scores
    return (rows.T if channels_first else rows)[None].copy()


def write_onnx(path: Path, output: np.ndarray, props: Mapping[str, str] | None = None,
               input_shape: Sequence[int] = (1, 3, 64, 64)) -> Path:
    """An ONNX file with one input ``images`` and the constant output ``output0``, with
    ``metadata_props`` (Ultralytics writes names, imgsz, stride, task there)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out = np.asarray(output, np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["c", "z"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes, "synthetic", [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(out.shape))],
        [numpy_helper.from_array(out, "c"), numpy_helper.from_array(np.zeros((), np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for key, value in (props or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
